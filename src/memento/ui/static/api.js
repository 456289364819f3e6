// The one way the dashboard talks to the server: /api with the session's CSRF header.
export const state = { csrf: null, who: null, agent: "" };

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export function withAgent(path) {
  if (!state.agent || !state.who || !state.who.admin) return path;
  return path + (path.includes("?") ? "&" : "?") + "agent_id=" + encodeURIComponent(state.agent);
}

export function headers(extra = {}) {
  const out = { ...extra };
  if (state.csrf) out["X-Memento-CSRF"] = state.csrf;
  return out;
}

export async function request(path, { method = "GET", body, raw = false, type } = {}) {
  const init = { method, headers: headers(), credentials: "same-origin" };
  if (body !== undefined) {
    if (typeof body === "string" || body instanceof Blob) {
      init.body = body;
      if (type) init.headers["Content-Type"] = type;
    } else {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
  }
  const response = await fetch(path, init);
  if (raw) return response;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { detail: text }; }
  if (!response.ok) {
    const message = (data && (data.detail || (data.error && data.error.message))) || response.statusText;
    throw new ApiError(response.status, `${response.status}: ${message}`, data);
  }
  return data;
}

export const api = (path, options) => request(withAgent("/api" + path), options);

export function query(params) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") q.set(key, value);
  }
  const s = q.toString();
  return s ? "?" + s : "";
}

export const canWrite = () => state.who && !state.who.readOnly;
