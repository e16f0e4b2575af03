/* Switchyard UI core: API calls, DOM building, times, live streams. Every page script is an ES
   module that imports it; the page's events travel on bus.js. */

const csrf = document.querySelector('meta[name="csrf-token"]')?.content || "";
const serverNow = Date.parse(document.documentElement.dataset.serverNow || "") || Date.now();
const skew = serverNow - Date.now(); // server clock minus browser clock, at load

class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status; this.code = code; this.details = details || {};
  }
}

/** Call the JSON API with the cookie session; failures throw ApiError with the API's message. */
async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res;
  try {
    res = await fetch(path, {
      method, headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, "network", "The server could not be reached. Check your connection.");
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (res.status === 401) {
    location.assign("/?next=" + encodeURIComponent(location.pathname + location.search));
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    throw new ApiError(res.status, err.code || "http_" + res.status,
      err.message || `The server answered ${res.status} ${res.statusText}.`, err.details);
  }
  return data;
}

/** h("a", {href: "/x", class: "y"}, "text", child): text is always text, never HTML. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(c));
  return el;
}
const $ = (sel, root) => (root || document).querySelector(sel);
const clear = (el) => { el.replaceChildren(); return el; };
/** Replace an element's children; null, undefined and false children are left out. */
const fill = (el, ...children) => append(clear(el), children);

const short = (id) => (id ? String(id).slice(0, 8) : "—");

// ---- times: "3 min ago" with the absolute time beside it, kept fresh by a ticker ----
const now = () => Date.now() + skew;
function ago(ms) {
  const s = Math.round((now() - ms) / 1000);
  const a = Math.abs(s);
  const [n, unit] = a < 5 ? [0, "now"] : a < 60 ? [a, "s"] : a < 3600 ? [Math.round(a / 60), "min"]
    : a < 86400 ? [Math.round(a / 3600), "h"] : [Math.round(a / 86400), "d"];
  if (unit === "now") return "just now";
  return s >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}
function absolute(ms) {
  const d = new Date(ms);
  const sameDay = new Date(now()).toDateString() === d.toDateString();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return sameDay ? time : `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
}
function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const ms = Date.parse(iso);
  const rel = h("span", { class: "rel" }, ago(ms));
  return h("time", { datetime: iso, title: new Date(ms).toString(), dataset: { ts: ms } },
    rel, " ", h("span", { class: "abs" }, absolute(ms)));
}
setInterval(() => {
  for (const t of document.querySelectorAll("time[data-ts]")) {
    const rel = t.querySelector(".rel");
    if (rel) rel.textContent = ago(Number(t.dataset.ts));
  }
}, 10000);

function duration(seconds) {
  if (seconds === null || seconds === undefined || isNaN(seconds)) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min`;
}
function between(startIso, endIso) {
  if (!startIso) return null;
  const end = endIso ? Date.parse(endIso) : now();
  return Math.max(0, (end - Date.parse(startIso)) / 1000);
}

/** Dotted names (job types) may wrap after a dot or underscore, and nowhere else. */
function breakable(name) {
  return String(name).split(/(?<=[._])/).flatMap((part, i) => (i ? [h("wbr"), part] : [part]));
}
const badge = (status) => h("span", { class: `badge s-${status}`, dataset: { status } }, status);
/** The outcome of the step a job's move ended with (a status event's `data.step`), or null. */
const stepOutcome = (e) => {
  const step = e.type === "status" ? e.data?.step : null;
  return step ? h("span", { class: "ev-step-outcome" }, `${step.name} ${step.status} · `) : null;
};
const jobLink = (id) => h("a", { href: `/jobs/${id}`, class: "mono", title: id }, short(id));
function pretty(value) {
  return h("pre", { class: "json" }, value === undefined ? "" : JSON.stringify(value, null, 2));
}
function empty(text) { return h("p", { class: "empty" }, text); }

// ---- flash messages (an aria-live region) ----
function flash(message, kind, link) {
  const box = $("#flash");
  if (!box) return;
  const item = h("div", { class: `flash ${kind || "info"}` }, message,
    link ? [" ", h("a", { href: link.href }, link.text)] : null,
    h("button", { type: "button", class: "link", "aria-label": "Dismiss",
      onclick: () => item.remove() }, "×"));
  box.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 15000 : 6000);
}
const fail = (e) => flash(e.message || String(e), "error");

/** Run an async action from a button: disabled while it runs, errors flashed. */
async function busy(button, fn) {
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  try { return await fn(); } catch (e) { fail(e); return undefined; } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
  }
}

// An EventSource hears only the event names it listens for: a type missing here never arrives.
// The coding agent's (phase … plan) are read by coding.js on the job page.
const EVENT_TYPES = ["status", "step", "log", "delta", "tool_call", "tool_result", "artifact", "error",
  "phase", "plan", "verify", "debug_mode", "diff", "pull_request"];

/**
 * Server-Sent Events with the API's event types; returns { close() }.
 * Each event is handed to onEvent once, by id: a replay may overlap what was seen. On a
 * dropped connection the browser comes back by itself with Last-Event-ID (which the server
 * prefers to the URL's cursor or tail); when it gives up (a 429 or 503), the stream is opened
 * again after a pause, from the last id it saw (?cursor=).
 * An event is `live` once the server's `replayed` marker came (the end of the first replay: the
 * history the page opened at); what a reconnect replays happened since, and is live too.
 */
function stream(url, onEvent, indicator) {
  const seen = new Set();
  const SEEN_LIMIT = 5000;
  let lastId = 0;
  let source = null;
  let closed = false;
  let timer = null;
  let failures = 0;
  let live = false; // until the server says its replay of the history is over
  const setState = (state, text) => {
    if (!indicator) return;
    indicator.dataset.state = state;
    indicator.textContent = text;
  };
  const resumeUrl = () => {
    if (!lastId) return url;
    const u = new URL(url, location.href);
    u.searchParams.delete("tail");
    u.searchParams.set("cursor", String(lastId));
    return u.pathname + u.search;
  };
  const receive = (msg) => {
    let e;
    try { e = JSON.parse(msg.data); } catch (err) { return; }
    lastId = Math.max(lastId, Number(msg.lastEventId) || 0); // a late event carries no id:
    if (seen.has(e.id)) return;
    seen.add(e.id);
    if (seen.size > SEEN_LIMIT) seen.delete(seen.values().next().value);
    e.live = live;
    onEvent(e);
  };
  function open() {
    source = new EventSource(resumeUrl());
    setState("connecting", failures ? "reconnecting…" : "connecting…");
    source.onopen = () => { failures = 0; setState("live", "live"); };
    source.onerror = () => {
      setState("connecting", "reconnecting…");
      if (source.readyState !== 2 || closed) return; // the browser retries by itself
      timer = setTimeout(open, Math.min(30000, 1000 * 2 ** failures++));
    };
    for (const type of EVENT_TYPES) source.addEventListener(type, receive);
    source.addEventListener("replayed", () => { live = true; });
  }
  open();
  return {
    close() { closed = true; clearTimeout(timer); source.close(); },
    get lastId() { return lastId; },
  };
}

/** Collapse bursts of calls (e.g. a replay of a hundred events) into one, `ms` later. */
function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

/** Read a form's fields into an object, with empty strings left out. */
function fields(form) {
  const out = {};
  for (const [k, v] of new FormData(form).entries()) if (v !== "") out[k] = v;
  return out;
}

export const SY = { api, ApiError, h, svg, $, clear, fill, append, breakable, short, time, ago, absolute,
  duration, between, badge, stepOutcome, jobLink, pretty, empty, flash, fail, busy, stream, debounce, fields,
  now };
export { api, ApiError, h, svg, $, clear, fill, append, breakable, short, time, ago, absolute, duration,
  between, badge, stepOutcome, jobLink, pretty, empty, flash, fail, busy, stream, debounce, fields, now };
