// Seed 003's state of an agent (/v1): its working-memory items, its skip list and its identity crystal.
import { request, withAgent } from "./api.js";
import { h, when } from "./dom.js";

const v1 = (path) => request(withAgent("/v1" + path));

function table(caption, heads, rows) {
  return h("table", {}, h("caption", { class: "muted" }, caption),
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))));
}

export async function agentStatePage(root) {
  const [items, skips, identity] = await Promise.all([v1("/working-memory/items?limit=100"), v1("/skip-list"), v1("/identity")]);
  root.replaceChildren(
    h("h1", {}, "Agent state"),
    h("p", { class: "muted" }, "Seed 003's working memory, skip list and identity of this namespace (read only here; agents change them over MCP or /v1)."),
    h("h2", {}, `Working-memory items (${items.total})`),
    items.items.length ? table("Priority first, then newest", ["Title", "Category", "Status", "Priority", "Next action", "Updated"],
      items.items.map((i) => [i.title, i.category, i.status, String(i.priority), i.next_action || "", when(i.updated_at)])) : h("p", { class: "muted" }, "No items."),
    h("h2", {}, `Skip list (${skips.total})`),
    skips.entries.length ? table("What the agent should not bring up again, until it expires", ["Item", "Reason", "Expires"],
      skips.entries.map((s) => [s.item, s.reason, when(s.expires)])) : h("p", { class: "muted" }, "Nothing on the skip list."),
    h("h2", {}, "Identity"),
    identity.found ? h("div", {}, h("p", { class: "muted" }, `${identity.source} · ${when(identity.created_at)}`), h("pre", { id: "identity-crystal" }, identity.crystal))
      : h("p", { class: "muted" }, "No identity crystal yet."),
  );
}
