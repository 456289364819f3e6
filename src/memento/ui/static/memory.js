// One memory: content, metadata, versions, links, entities, access; amend, pin, forget (soft with
// undo, hard with its receipt).
import { api, canWrite } from "./api.js";
import { field, h, say, snippet, when } from "./dom.js";

function meta(pairs) {
  return h("dl", { class: "meta" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "").flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]));
}

export async function memoryPage(root, id) {
  const d = await api(`/memories/${encodeURIComponent(id)}/details`);
  const m = d.memory;
  const status = h("div", { "aria-live": "polite" });
  const path = `/memories/${encodeURIComponent(id)}`;

  const actions = h("div", { class: "actions", role: "group", "aria-label": "Change this memory" });
  if (canWrite()) {
    const content = h("textarea", { name: "content", rows: 6 }, m.content);
    const tagInput = h("input", { name: "tags", value: (m.tags || []).join(", "), size: 30 });
    const amend = h("form", { class: "panel", onsubmit: async (event) => {
      event.preventDefault();
      const tags = tagInput.value.split(",").map((t) => t.trim()).filter(Boolean);
      await api(path, { method: "PUT", body: { content: content.value, tags } });
      say("Amended: the old text is kept as a version.");
      memoryPage(root, id);
    } },
      h("h2", {}, "Amend"), field("Content", content), field("Tags (comma-separated)", tagInput),
      h("div", { class: "actions" }, h("button", { type: "submit" }, "Save amendment")));

    actions.append(
      h("button", { type: "button", class: "secondary", onclick: async () => {
        await api(path + "/pin", { method: m.pinned ? "DELETE" : "POST" });
        say(m.pinned ? "Unpinned." : "Pinned: it never expires, decays or merges.");
        memoryPage(root, id);
      } }, m.pinned ? "Unpin" : "Pin"),
      h("button", { type: "button", class: "danger", onclick: async () => {
        const result = await api(path + "?mode=soft", { method: "DELETE" });
        const undo = h("button", { type: "button", onclick: async () => {
          await api(path + "/restore", { method: "POST" });
          say("Restored.");
          memoryPage(root, id);
        } }, "Undo");
        status.replaceChildren(h("div", { class: "panel", role: "alert" },
          h("p", {}, `Forgotten. It can be restored until ${when(result.restorableUntil) || "the retention period ends"}.`), undo));
        undo.focus();
      } }, "Forget"),
      h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm("Erase this memory for good? This cannot be undone.")) return;
        const result = await api(path + "?mode=hard", { method: "DELETE" });
        const receipt = h("pre", { id: "receipt", tabindex: "0" }, JSON.stringify(result.receipt, null, 2));
        root.replaceChildren(h("h1", {}, "Erased"),
          h("p", {}, `Memory ${id} is erased everywhere. Keep this receipt to prove it (POST /api/erasures/verify).`),
          h("h2", {}, "Erasure receipt"), receipt, h("p", {}, h("a", { href: "#/memories" }, "Back to the memories")));
        receipt.focus();
      } }, "Erase for good"),
    );
    root.replaceChildren(header(m), actions, status, body(d), amend);
  } else {
    root.replaceChildren(header(m), status, body(d));
  }
}

function header(m) {
  return h("div", {}, h("h1", {}, `Memory ${m.id}`), h("p", {}, h("a", { href: "#/memories" }, "← All memories")));
}

function body(d) {
  const m = d.memory;
  return h("div", {},
    h("h2", {}, "Content"), h("pre", { id: "content" }, m.detail || m.content),
    h("h2", {}, "Metadata"),
    meta([["Type", m.type], ["Topic", m.topic], ["Tags", (m.tags || []).join(", ")], ["Memory system", m.memorySystem], ["Tier", m.ttlTier],
      ["Pinned", m.pinned ? "yes" : "no"], ["Agent", m.agentId], ["Confidence", m.confidence], ["Importance", m.importance],
      ["Source", m.source], ["Created", when(m.createdAt)], ["Expires", when(m.expiresAt)], ["Has embedding", m.hasEmbedding ? "yes" : "no"]]),
    Object.keys(m.metadata || {}).length ? h("pre", {}, JSON.stringify(m.metadata, null, 2)) : null,
    h("h2", {}, "Access history"),
    meta([["Accessed", `${m.accessCount} times`], ["Last access", when(m.accessedAt) || "never"], ["Utility", m.utilityScore],
      ...Object.entries(d.feedback).map(([k, v]) => [`Feedback: ${k}`, v])]),
    h("h2", {}, `Versions (${d.versions.length})`),
    d.versions.length ? h("ol", { id: "versions" }, d.versions.map((v) => h("li", {}, `${when(v.amended_at)} by ${v.amended_by || "?"}: `, snippet(v.content, 200)))) : h("p", { class: "muted" }, "No earlier versions."),
    h("h2", {}, `Links (${d.links.length})`),
    d.links.length ? h("ul", {}, d.links.map((l) => h("li", {}, `${l.direction === "out" ? "→" : "←"} ${l.relation} `,
      h("a", { href: `#/memory/${encodeURIComponent(l.other_id)}` }, snippet(l.other_content, 100))))) : h("p", { class: "muted" }, "No links."),
    h("h2", {}, `Entities (${d.entities.length})`),
    d.entities.length ? h("ul", {}, d.entities.map((e) => h("li", {}, `${e.name} (${e.entity_type})`))) : h("p", { class: "muted" }, "No entities."),
  );
}
