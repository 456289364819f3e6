// The entity graph: entities and their relations (cytoscape.js, vendored: cytoscape.LICENSE.txt),
// the whole namespace's first 100, or the neighbourhood of one entity with its memories. The same
// edges are listed in a table below, for keyboards and screen readers.
import cytoscape from "./cytoscape.esm.min.js";
import { api, query } from "./api.js";
import { field, h, select, snippet } from "./dom.js";

const STYLE = [
  { selector: "node", style: { label: "data(label)", "background-color": "#0b5cad", color: "#1b1f24", "font-size": 12, "text-valign": "bottom", "text-margin-y": 4 } },
  { selector: "node.memory", style: { "background-color": "#c2410c", shape: "round-rectangle", width: 14, height: 14, "font-size": 9 } },
  { selector: "edge", style: { width: 2, "line-color": "#6b7480", "target-arrow-color": "#6b7480", "target-arrow-shape": "triangle", "curve-style": "bezier", label: "data(label)", "font-size": 9, color: "#4a5360" } },
  { selector: "edge.mentions", style: { "line-style": "dashed", "target-arrow-shape": "none", label: "" } },
];

export async function graphPage(root) {
  const entities = (await api("/entities" + query({ limit: 100 }))).items;
  const chooser = select("entity", [["", "every entity (first 100)"], ...entities.map((e) => [e.id, e.name])], "");
  const depth = select("depth", [["1", "1"], ["2", "2"], ["3", "3"]], "2");
  const canvas = h("div", { id: "graph", class: "graph", role: "img", "aria-label": "Graph of entities and relations; the same edges are listed in the table below" });
  const listing = h("div");
  const form = h("form", { class: "filters", onsubmit: (event) => { event.preventDefault(); draw(); } },
    field("Centre on", chooser), field("Depth", depth), h("button", { type: "submit" }, "Show"));
  root.replaceChildren(h("h1", {}, "Graph"), form, canvas, listing);

  async function draw() {
    const nodes = new Map();
    const edges = [];
    if (chooser.value) {
      const g = await api(`/entities/${encodeURIComponent(chooser.value)}/graph` + query({ depth: depth.value, include_memories: "true" }));
      for (const n of g.nodes) {
        nodes.set(n.entity.id, { id: n.entity.id, label: n.entity.name });
        for (const m of n.memories || []) {
          nodes.set(m.id, { id: m.id, label: snippet(m.content, 24), memory: true });
          edges.push({ id: `${n.entity.id}-${m.id}`, source: n.entity.id, target: m.id, label: "mentions", mentions: true });
        }
      }
      for (const e of g.edges) edges.push({ id: e.id, source: e.source_id, target: e.target_id, label: e.relation_type, from: e.source, to: e.target });
    } else {
      for (const e of entities) nodes.set(e.id, { id: e.id, label: e.name });
      for (const e of (await api("/relations" + query({ limit: 100 }))).items) {
        if (nodes.has(e.source_id) && nodes.has(e.target_id)) edges.push({ id: e.id, source: e.source_id, target: e.target_id, label: e.relation_type, from: e.source, to: e.target });
      }
    }
    const elements = [
      ...[...nodes.values()].map((n) => ({ data: n, classes: n.memory ? "memory" : "" })),
      ...edges.map((e) => ({ data: e, classes: e.mentions ? "mentions" : "" })),
    ];
    canvas.replaceChildren();
    if (!nodes.size) {
      canvas.append(h("p", { class: "muted" }, "No entities yet."));
    } else {
      const cy = cytoscape({ container: canvas, elements, style: STYLE, layout: { name: "cose", animate: false } });
      cy.on("tap", "node.memory", (event) => { location.hash = `#/memory/${encodeURIComponent(event.target.id())}`; });
    }
    const relations = edges.filter((e) => !e.mentions);
    listing.replaceChildren(h("h2", {}, `Relations (${relations.length})`), relations.length
      ? h("table", {}, h("thead", {}, h("tr", {}, ["From", "Relation", "To"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, relations.map((e) => h("tr", { class: "relation" }, h("td", {}, e.from), h("td", {}, e.label), h("td", {}, e.to)))))
      : h("p", { class: "muted" }, "No relations."));
  }
  await draw();
}
