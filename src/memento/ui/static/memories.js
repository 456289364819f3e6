// Browse (filters, server-side paging, bulk actions) and search (full-text and semantic, with why).
import { api, canWrite, query } from "./api.js";
import { field, h, say, select, snippet, when } from "./dom.js";

const TYPES = ["", "fact", "decision", "error", "preference", "procedure", "relation", "episode", "observation", "learning", "pattern"];
const SYSTEMS = ["", "working", "episodic", "semantic", "procedural"];
const TIERS = ["", "hot", "warm", "cold", "permanent"];
const PAGE = 25;
const browse = { filters: {}, offset: 0 };

function filterForm(values, onSubmit, extra = []) {
  const form = h("form", { class: "filters", role: "search", onsubmit: (event) => {
    event.preventDefault();
    onSubmit(Object.fromEntries(new FormData(form).entries()));
  } },
    ...extra,
    field("Type", select("types", TYPES.map((t) => [t, t || "any"]), values.types)),
    field("Topic", h("input", { name: "topic", value: values.topic || "", size: 12 })),
    field("Tags (all of)", h("input", { name: "tags", value: values.tags || "", size: 12, placeholder: "a,b" })),
    field("Memory system", select("memory_system", SYSTEMS.map((t) => [t, t || "any"]), values.memory_system)),
    field("Tier", select("tier", TIERS.map((t) => [t, t || "any"]), values.tier)),
    field("Pinned", select("pinned", [["", "any"], ["true", "pinned"], ["false", "not pinned"]], values.pinned)),
    h("button", { type: "submit" }, extra.length ? "Search" : "Apply"),
  );
  return form;
}

function tags(list) {
  return (list || []).map((t) => h("span", { class: "tag" }, t));
}

export async function memoriesPage(root) {
  const table = h("div");
  const form = filterForm(browse.filters, (values) => { browse.filters = values; browse.offset = 0; load(); });
  const selected = new Set();
  const bulkBar = h("div", { class: "actions", role: "group", "aria-label": "With the selected memories" });

  async function bulk(action) {
    if (!selected.size) return say("Select memories first.");
    if (action === "forget" && !confirm(`Forget ${selected.size} memories? (You can undo.)`)) return;
    const ids = [...selected];
    const result = await api("/memories/bulk", { method: "POST", body: { ids, action } });
    say(`${action}: ${result.count} changed.`);
    if (action === "forget") {
      const undo = h("button", { type: "button", class: "secondary", onclick: async () => {
        await api("/memories/bulk", { method: "POST", body: { ids: result.ids, action: "restore" } });
        say(`Restored ${result.ids.length}.`);
        undo.remove();
        load();
      } }, `Undo forget of ${result.ids.length}`);
      bulkBar.append(undo);
    }
    load();
  }

  if (canWrite()) {
    bulkBar.append(
      h("button", { type: "button", class: "secondary", onclick: () => bulk("pin") }, "Pin selected"),
      h("button", { type: "button", class: "secondary", onclick: () => bulk("unpin") }, "Unpin selected"),
      h("button", { type: "button", class: "danger", onclick: () => bulk("forget") }, "Forget selected"),
    );
  }

  async function load() {
    selected.clear();
    const page = await api("/memories" + query({ ...browse.filters, limit: PAGE, offset: browse.offset }));
    const head = h("tr", {},
      canWrite() ? h("th", { scope: "col" }, h("span", { class: "muted" }, "Select")) : null,
      h("th", { scope: "col" }, "Content"), h("th", { scope: "col" }, "Type"),
      h("th", { scope: "col", class: "hide-narrow" }, "Topic"), h("th", { scope: "col", class: "hide-narrow" }, "Created"));
    const rows = page.items.map((m) => h("tr", {},
      canWrite() ? h("td", {}, h("input", { type: "checkbox", "aria-label": `Select ${snippet(m.content, 40)}`, onchange: (e) => e.target.checked ? selected.add(m.id) : selected.delete(m.id) })) : null,
      h("td", { class: "content" }, h("a", { href: `#/memory/${encodeURIComponent(m.id)}` }, snippet(m.content, 140)), " ", tags(m.tags)),
      h("td", {}, m.memory_type), h("td", { class: "hide-narrow" }, m.topic), h("td", { class: "hide-narrow" }, when(m.created_at))));
    const last = Math.min(browse.offset + page.items.length, page.total);
    table.replaceChildren(
      page.items.length ? h("table", {}, h("caption", { class: "muted" }, `${page.total} ${page.total === 1 ? "memory" : "memories"}; showing ${page.total ? browse.offset + 1 : 0}–${last}`), h("thead", {}, head), h("tbody", {}, rows)) : h("p", {}, "No memories match."),
      h("div", { class: "pager" },
        h("button", { type: "button", class: "secondary", disabled: browse.offset === 0, onclick: () => { browse.offset = Math.max(0, browse.offset - PAGE); load(); } }, "Previous page"),
        h("button", { type: "button", class: "secondary", disabled: last >= page.total, onclick: () => { browse.offset += PAGE; load(); } }, "Next page")),
    );
  }

  root.replaceChildren(h("h1", {}, "Memories"), form, bulkBar, table);
  await load();
}

const searchState = { values: { mode: "hybrid" }, offset: 0 };

export async function searchPage(root) {
  const results = h("div", { "aria-live": "polite" });
  const q = h("input", { name: "q", type: "search", value: searchState.values.q || "", size: 28, required: true });
  const mode = select("mode", [["hybrid", "hybrid (full text + semantic)"], ["keyword", "full text"], ["semantic", "semantic"], ["graph", "graph"]], searchState.values.mode);
  const form = filterForm(searchState.values, (values) => { searchState.values = values; searchState.offset = 0; run(); }, [field("Query", q), field("Mode", mode)]);

  async function run() {
    const v = searchState.values;
    if (!v.q) return;
    const found = await api("/memories/search" + query({ ...v, limit: 20, offset: searchState.offset }));
    const hits = found.results.map((r) => h("article", { class: "hit" },
      h("p", {}, h("a", { href: `#/memory/${encodeURIComponent(r.memory.id)}` }, snippet(r.memory.content, 220))),
      h("p", { class: "muted" }, `${r.memory.memory_type} · ${r.memory.topic} · score ${Number(r.score).toFixed(3)} `, tags(r.memory.tags)),
      h("p", { class: "why" }, "Why: " + describeWhy(r))));
    results.replaceChildren(
      h("p", { class: "muted" }, `${found.total} ${found.total === 1 ? "match" : "matches"} (${found.search_mode})`),
      ...(hits.length ? hits : [h("p", {}, "Nothing found.")]),
      h("div", { class: "pager" },
        h("button", { type: "button", class: "secondary", disabled: searchState.offset === 0, onclick: () => { searchState.offset = Math.max(0, searchState.offset - 20); run(); } }, "Previous page"),
        h("button", { type: "button", class: "secondary", disabled: searchState.offset + 20 >= found.total, onclick: () => { searchState.offset += 20; run(); } }, "Next page")),
    );
  }

  root.replaceChildren(h("h1", {}, "Search"), form, results);
  await run();
  q.focus();
}

export function describeWhy(result) {
  const why = result.why;
  if (!why) return "matched";
  if (typeof why === "string") return why;
  if (Array.isArray(why)) return why.map((w) => (typeof w === "string" ? w : JSON.stringify(w))).join("; ");
  return Object.entries(why).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join("; ");
}
