// The live feed (the /api/events stream, read with fetch so it carries the CSRF header) and the
// operations: a consolidation run (dry run or real), export and import with progress.
import { api, headers, state, withAgent } from "./api.js";
import { field, h, say, snippet, when } from "./dom.js";

let live = null;
export function stopLive() {
  if (live) live.abort();
  live = null;
}

function parseEvents(buffer, onEvent) {
  const blocks = buffer.split("\n\n");
  const rest = blocks.pop();
  for (const block of blocks) {
    const event = { type: "message", data: "", id: null };
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const [key, ...value] = line.split(":");
      const text = value.join(":").replace(/^ /, "");
      if (key === "event") event.type = text;
      else if (key === "data") event.data += text;
      else if (key === "id") event.id = text;
    }
    if (event.data) onEvent(event);
  }
  return rest;
}

export async function followEvents(onEvent, onState) {
  stopLive();
  const controller = new AbortController();
  live = controller;
  let lastId = null;
  while (!controller.signal.aborted) {
    try {
      const extra = lastId ? { "Last-Event-ID": lastId } : {};
      const response = await fetch(withAgent("/api/events"), { headers: headers(extra), signal: controller.signal, credentials: "same-origin" });
      if (!response.ok) { onState(`stream refused (${response.status})`); return; }
      onState("connected");
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), (event) => { lastId = event.id || lastId; onEvent(event); });
      }
      onState("reconnecting…");
    } catch (err) {
      if (controller.signal.aborted) return;
      onState("reconnecting…");
    }
    await new Promise((resolve) => setTimeout(resolve, 1500));
  }
}

export async function livePage(root) {
  const feed = h("ol", { class: "feed", id: "feed", "aria-live": "polite", "aria-relevant": "additions" });
  const state = h("span", { id: "stream-state" }, "connecting…");
  root.replaceChildren(h("h1", {}, "Live events"), h("p", {}, "Stream: ", state), feed);
  followEvents((event) => {
    let data = {};
    try { data = JSON.parse(event.data); } catch { data = { raw: event.data }; }
    const target = data.id && !String(event.type).includes("deleted") ? h("a", { href: `#/memory/${encodeURIComponent(data.id)}` }, data.id) : (data.id || "");
    const text = data.content ? ` ${snippet(data.content, 120)}` : data.name ? ` ${data.name}` : "";
    feed.prepend(h("li", { class: "event", "data-type": event.type }, h("strong", {}, event.type), " ", target, text, h("span", { class: "muted" }, ` · ${when(new Date().toISOString())}`)));
    while (feed.children.length > 200) feed.lastChild.remove();
  }, (text) => { state.textContent = text; });
}

const STAGE_FIELDS = ["hotToWarm", "warmToCold", "expired", "confidencePruned", "decayed", "deduplicated", "merged", "contradictions", "orphanLinksPruned", "utilityRecomputed", "embeddingsBackfilled", "workingMemoryExpired", "workingMemorySummarized", "forgottenPurged"];

export async function operationsPage(root) {
  const result = h("div", { id: "consolidation-result", "aria-live": "polite" });
  const runs = h("div");
  const dry = h("input", { type: "checkbox", name: "dry", checked: true });
  const progress = h("progress", { hidden: true, "aria-label": "Consolidation running" });
  const start = h("button", { type: "submit" }, "Start consolidation");
  const form = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    start.disabled = true; progress.hidden = false; progress.removeAttribute("value");
    result.replaceChildren(h("p", {}, dry.checked ? "Dry run in progress…" : "Consolidation in progress…"));
    const began = performance.now();
    try {
      const report = await api("/lifecycle/consolidate", { method: "POST", body: { dryRun: dry.checked } });
      const seconds = ((performance.now() - began) / 1000).toFixed(1);
      progress.value = 1; progress.max = 1;
      result.replaceChildren(h("h3", {}, `${report.dryRun ? "Dry run" : "Run"} finished in ${seconds} s${report.dryRun ? " — nothing changed" : ""}`),
        h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Stage"), h("th", { scope: "col" }, "Count"))),
          h("tbody", {}, STAGE_FIELDS.filter((k) => report[k] !== undefined && report[k] !== null).map((k) => h("tr", {}, h("td", {}, k.replace(/([A-Z])/g, " $1").toLowerCase()), h("td", {}, report[k]))))));
      loadRuns();
    } finally {
      start.disabled = false;
    }
  } }, h("h2", {}, "Consolidation"), h("p", { class: "muted" }, "Runs the maintenance pipeline now (tiers, decay, merges, contradictions, clean-up)."),
    h("label", { class: "inline", for: "dry-run" }, Object.assign(dry, { id: "dry-run" }), "Dry run (report only, change nothing)"),
    h("div", { class: "actions" }, start), progress, result);

  async function loadRuns() {
    const found = await api("/lifecycle/runs?limit=10");
    runs.replaceChildren(found.runs.length ? h("table", {},
      h("thead", {}, h("tr", {}, ["Started", "Trigger", "Agent", "Outcome"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, found.runs.map((r) => h("tr", {}, h("td", {}, when(r.startedAt)), h("td", {}, r.trigger), h("td", {}, r.wholeStore ? "every agent" : r.agentId || ""), h("td", {}, r.outcome))))) : h("p", { class: "muted" }, "No runs yet."));
  }

  const exporter = exportPanel();
  const importer = importPanel();
  const writable = !state.who.readOnly;
  root.replaceChildren(h("h1", {}, "Operations"), writable ? form : null, h("h2", {}, "Recent runs"), runs, exporter, writable ? importer : null);
  await loadRuns();
}

function exportPanel() {
  const format = h("select", { name: "format" }, ["ndjson", "markdown", "csv"].map((f) => h("option", { value: f }, f)));
  const bar = h("p", { class: "muted", "aria-live": "polite" });
  return h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    const response = await fetch(withAgent(`/api/export?format=${format.value}`), { headers: headers(), credentials: "same-origin" });
    if (!response.ok) return say(`export refused (${response.status})`, true);
    const reader = response.body.getReader();
    const parts = [];
    let bytes = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value); bytes += value.length;
      bar.textContent = `${(bytes / 1024).toFixed(1)} KiB received…`;
    }
    bar.textContent = `Done: ${(bytes / 1024).toFixed(1)} KiB.`;
    const ext = { ndjson: "jsonl", markdown: "md", csv: "csv" }[format.value];
    const link = h("a", { href: URL.createObjectURL(new Blob(parts)), download: `memento-export.${ext}` }, "download");
    document.body.append(link); link.click(); link.remove();
  } }, h("h2", {}, "Export"), field("Format", format), h("div", { class: "actions" }, h("button", { type: "submit" }, "Export")), bar);
}

function importPanel() {
  const file = h("input", { type: "file", name: "file", accept: ".jsonl,.ndjson,application/x-ndjson" });
  const progress = h("progress", { max: 1, value: 0, "aria-label": "Import upload" });
  const out = h("div", { "aria-live": "polite" });
  return h("form", { class: "panel", onsubmit: (event) => {
    event.preventDefault();
    if (!file.files.length) return say("Choose an NDJSON export first.", true);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", withAgent("/api/import"));
    for (const [k, v] of Object.entries(headers({ "Content-Type": "application/x-ndjson" }))) xhr.setRequestHeader(k, v);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) { progress.max = e.total; progress.value = e.loaded; } };
    xhr.onload = () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch { body = { detail: xhr.responseText }; }
      const count = (v) => (v && typeof v === "object" ? Object.values(v).reduce((a, b) => a + b, 0) : v || 0);
      const kinds = (v) => Object.entries(v || {}).map(([k, n]) => `${n} ${k}`).join(", ") || "nothing";
      out.replaceChildren(xhr.status < 300
        ? h("p", { id: "import-result" }, `Read ${count(body.read)} records (${kinds(body.read)}): restored ${count(body.restored)}, already present ${count(body.already_present)}, skipped ${count(body.skipped)}.`)
        : h("p", { class: "error" }, `${xhr.status}: ${body.detail || "refused"}`));
    };
    xhr.send(file.files[0]);
  } }, h("h2", {}, "Import"), field("NDJSON export file", file), h("div", { class: "actions" }, h("button", { type: "submit" }, "Import")), progress, out);
}
