// Small DOM helpers: every text goes in as a text node, never as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "style") el.style.cssText = value; // through the CSSOM: allowed by the page's CSP
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

let uid = 0;
export function field(label, control, cls) {
  const id = control.id || `f${++uid}`;
  control.id = id;
  return h("label", { for: id, class: cls }, label, control);
}

export function select(name, options, value) {
  const el = h("select", { name });
  for (const option of options) {
    const [v, text] = Array.isArray(option) ? option : [option, option];
    const o = h("option", { value: v }, text);
    if (String(v) === String(value ?? "")) o.selected = true;
    el.append(o);
  }
  return el;
}

export function say(text, isError = false) {
  const box = document.getElementById("status");
  box.textContent = "";
  box.append(h("span", { class: isError ? "error" : "" }, text));
  clearTimeout(say.timer);
  say.timer = setTimeout(() => (box.textContent = ""), 6000);
}

export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

export function snippet(text, n = 160) {
  const flat = String(text || "").replace(/\s+/g, " ").trim();
  return flat.length > n ? flat.slice(0, n - 1) + "…" : flat;
}
