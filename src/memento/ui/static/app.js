// The dashboard's shell: who is logged in, the login page, and the hash router.
import { request, state } from "./api.js";
import { field, h, say } from "./dom.js";
import { memoriesPage, searchPage } from "./memories.js";
import { memoryPage } from "./memory.js";
import { livePage, operationsPage, stopLive } from "./activity.js";
import { analyticsPage } from "./analytics.js";
import { agentStatePage } from "./agentstate.js";
import { graphPage } from "./graph.js";

const main = () => document.getElementById("main");

const PAGES = {
  memories: ["Memories", memoriesPage],
  search: ["Search", searchPage],
  memory: ["Memory", memoryPage],
  live: ["Live events", livePage],
  operations: ["Operations", operationsPage],
  analytics: ["Analytics", analyticsPage],
  agent: ["Agent state", agentStatePage],
  graph: ["Graph", graphPage],
};

async function loadSession() {
  try {
    const who = await request("/ui/session");
    state.csrf = who.csrf;
    state.who = who;
    return true;
  } catch (err) {
    if (err.status === 401) return false;
    throw err;
  }
}

function loginPage() {
  document.getElementById("nav").hidden = true;
  document.getElementById("who").textContent = "";
  document.title = "Log in · Memento dashboard";
  const key = h("input", { type: "password", name: "key", autocomplete: "current-password", required: true });
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "login panel", onsubmit: async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      const who = await request("/ui/login", { method: "POST", body: { key: key.value } });
      state.csrf = who.csrf;
      state.who = who;
      key.value = "";
      renderWho();
      if (!location.hash || location.hash === "#/login") location.hash = "#/memories";
      else route().then(() => main().focus());
    } catch (err) {
      error.textContent = err.status === 401 ? "That key is not known (or has expired)." : err.message;
    }
  } },
    field("Access key", key),
    h("p", { class: "muted" }, "The operator key or a named key (MEMENTO_KEYS). The session ends after a while idle."),
    h("button", { type: "submit" }, "Log in"),
    error,
  );
  main().replaceChildren(h("h1", {}, "Log in"), form);
  key.focus();
}

function renderWho() {
  const box = document.getElementById("who");
  const who = state.who;
  document.getElementById("nav").hidden = false;
  const parts = [h("span", { id: "identity" }, `${who.subject} · ${who.agent ? "agent " + who.agent : "admin"} · ${who.readOnly ? "read-only" : "read-write"}`)];
  if (who.admin) {
    const input = h("input", { name: "agent", value: state.agent, placeholder: "default", size: 12 });
    input.addEventListener("change", () => { state.agent = input.value.trim(); sessionStorage.setItem("memento-agent", state.agent); route(); });
    parts.push(h("label", { class: "inline", for: "agent-select" }, "Agent", Object.assign(input, { id: "agent-select" })));
  }
  if (who.auth) {
    parts.push(h("button", { type: "button", class: "secondary", onclick: async () => {
      await request("/ui/logout", { method: "POST" }).catch(() => {});
      state.csrf = null; state.who = null; stopLive();
      loginPage();
    } }, "Log out"));
  }
  box.replaceChildren(...parts);
}

export async function route() {
  stopLive();
  if (!state.who) {
    if (!(await loadSession())) return loginPage();
    renderWho();
  }
  const [name, ...rest] = (location.hash.replace(/^#\/?/, "") || "memories").split("/");
  const [title, page] = PAGES[name] || PAGES.memories;
  document.title = `${title} · Memento dashboard`;
  for (const link of document.querySelectorAll("nav a")) {
    if (link.getAttribute("href") === `#/${name}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const root = main();
  root.replaceChildren(h("p", {}, "Loading…"));
  try {
    await page(root, decodeURIComponent(rest.join("/")));
  } catch (err) {
    if (err.status === 401) { state.who = null; return loginPage(); }
    root.replaceChildren(h("h1", {}, title), h("p", { class: "error", role: "alert" }, err.message));
  }
}

window.addEventListener("hashchange", () => { route().then(() => main().focus()); });
window.addEventListener("unhandledrejection", (event) => say(String(event.reason && event.reason.message || event.reason), true));
state.agent = sessionStorage.getItem("memento-agent") || "";
route();
