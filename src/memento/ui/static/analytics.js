// Counts by type, tier and system, growth, the confidence histogram and the consolidation history.
import { api, request, state } from "./api.js";
import { h, when } from "./dom.js";

function bars(rows, label) {
  const max = Math.max(1, ...rows.map(([, n]) => n));
  return h("table", { class: "chart" }, h("caption", { class: "muted" }, label),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Value"), h("th", { scope: "col" }, "Share"), h("th", { scope: "col" }, "Count"))),
    h("tbody", {}, rows.map(([name, n]) => h("tr", {},
      h("td", {}, name),
      h("td", { class: "barcell" }, h("div", { class: "bar", style: `width:${(100 * n) / max}%` })),
      h("td", {}, String(n))))));
}

export async function analyticsPage(root) {
  const [overview, breakdown, growth, confidence, runs] = await Promise.all([
    api("/analytics/overview"), api("/analytics/breakdown"), api("/analytics/growth?period=day&limit=30"), api("/analytics/confidence"),
    api("/lifecycle/runs?limit=20"),
  ]);
  const latency = state.who.admin ? await request("/ui/latency").catch(() => null) : null;
  const card = (label, value) => h("div", { class: "card" }, h("strong", {}, String(value ?? "—")), label);
  root.replaceChildren(
    h("h1", {}, "Analytics"),
    h("div", { class: "cards" },
      card("memories", overview.total_memories), card("entities", overview.total_entities), card("relations", overview.total_relations),
      card("mean effective confidence", overview.average_effective_confidence?.toFixed?.(3) ?? "—"),
      card(`below ${overview.low_confidence_below} confidence`, overview.low_confidence_count)),
    h("h2", {}, "By type"), bars(Object.entries(overview.memories_by_type).filter(([, n]) => n > 0), "Memories by type"),
    h("h2", {}, "By tier"), bars(Object.entries(breakdown.tiers), "Memories by tier"),
    h("h2", {}, "By memory system"), bars(Object.entries(breakdown.memory_systems), "Memories by memory system"),
    h("h2", {}, "Pinned"), bars([["pinned", breakdown.pinned.true], ["not pinned", breakdown.pinned.false]], "Pinned memories"),
    h("h2", {}, "Growth (new memories per day)"), growth.points.length ? bars(growth.points.map((p) => [p.period_start, p.count]), "Growth per day") : h("p", { class: "muted" }, "No memories yet."),
    h("h2", {}, "Effective confidence"), bars(confidence.buckets.map((b) => [`${b.lower.toFixed(1)}–${b.upper.toFixed(1)}`, b.count]), "Confidence histogram"),
    h("h2", {}, "Latency (this server process)"),
    latency ? h("table", {}, h("caption", { class: "muted" }, "From the metrics: the median and 95th percentile are at most the bucket bound shown"),
      h("thead", {}, h("tr", {}, ["Operation", "Calls", "Mean (ms)", "Median ≤ (ms)", "95th ≤ (ms)"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, latency.latencies.map((l) => h("tr", {}, h("td", {}, l.name), h("td", {}, l.count), h("td", {}, l.mean_ms ?? "—"),
        h("td", {}, l.p50_under_ms ?? "—"), h("td", {}, l.p95_under_ms ?? "—")))))
      : h("p", { class: "muted" }, "Latency figures need an admin key (they cover the whole server)."),
    h("h2", {}, "Consolidation history"),
    runs.runs.length ? h("table", {}, h("thead", {}, h("tr", {}, ["Started", "Finished", "Trigger", "Outcome"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, runs.runs.map((r) => h("tr", {}, h("td", {}, when(r.startedAt)), h("td", {}, when(r.finishedAt)), h("td", {}, r.trigger), h("td", {}, r.outcome))))) : h("p", { class: "muted" }, "No runs yet."),
  );
}
