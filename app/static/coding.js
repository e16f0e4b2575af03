/* The job page of a coding job (code.*): phases, plan, tool calls, verification rounds, the diff,
   the pull request and the cost. Built from the job's events: its whole history first (the page's
   stream opens at a recent window), then the live ones job.js hands on. All of it is model or
   repository text: only ever text nodes. */
import { api, h, $, fill, empty, pretty, short, fail } from "./ui.js";
import { diffView } from "./diff_view.js";
import { subscribe } from "./bus.js";
import { TERMINAL } from "./job_kinds.js";

const enc = encodeURIComponent($("#job").dataset.jobId);
const TYPES = ["phase", "plan", "tool_call", "tool_result", "verify", "debug_mode", "diff", "pull_request"];
const PHASES = ["clone", "setup", "map", "explore", "plan", "build", "verify", "deliver"];
const PHASE_STATE = { done: "done", running: "running", pending: "not started", skipped: "skipped", stopped: "stopped" };
const box = $("#coding");
const callList = $("#coding-calls");
const roundList = $("#coding-verify");

let job = null;
let queued = []; // events that came before the job said what it is
const seen = new Set();
const phases = []; // phase events, by id
const latest = { plan: null, diff: null, pull_request: null }; // the newest event of each
const calls = new Map(); // call_id -> { call, result, li }
let debugSwitches = 0;
let lastSubtask = null; // { id, subtask } of the newest tool call
const dirty = new Set();
let flushing = null;

const isCoding = (j) => String(j.job_type).startsWith("code.");
const cut = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const httpUrl = (u) => typeof u === "string" && /^https?:\/\//i.test(u);
const byId = (a, b) => a.id - b.id;

/** Put `el` among `list`'s children in event-id order (a late or older event goes where it belongs). */
function place(list, el, id) {
  el.dataset.eventId = id;
  const idOf = (n) => Number(n.dataset.eventId);
  const prev = el.previousElementSibling, next = el.nextElementSibling;
  if (el.parentNode === list && (!prev || idOf(prev) < id) && (!next || idOf(next) > id)) return;
  el.remove();
  const last = list.lastElementChild;
  list.insertBefore(el, !last || idOf(last) < id ? null : [...list.children].find((c) => idOf(c) > id));
}

// ---- tool calls: one collapsed item each, its body built when opened ------------------------
function inputSummary(name, input) {
  if (!input || typeof input !== "object") return "";
  const str = (k) => (typeof input[k] === "string" ? input[k] : null);
  const text = name === "run" && str("command") ? `$ ${str("command")}`
    : name === "search" && (str("pattern") || str("query"))
      ? `${str("pattern") || str("query")}${str("path") ? ` in ${str("path")}` : ""}`
      : str("path") || str("command") || str("summary") || str("message") || JSON.stringify(input);
  return cut(text.replace(/\s+/g, " "), 200);
}

function inputView(input) {
  if (!input || typeof input !== "object" || Array.isArray(input)) return pretty(input);
  const entries = Object.entries(input);
  if (!entries.length) return h("p", { class: "muted small" }, "No arguments.");
  return h("dl", { class: "tool-args" }, entries.map(([k, v]) => [h("dt", {}, k), h("dd", {},
    typeof v !== "string" ? h("code", {}, JSON.stringify(v))
      : v.includes("\n") || v.length > 100 ? h("pre", { class: "output" }, v) : h("code", {}, v))]));
}

function callState(c) {
  if (c.result) return c.result.data?.is_error ? "error" : "ok";
  return job && TERMINAL.has(job.status) ? "none" : "running";
}
const CALL_BADGE = { ok: ["s-completed", "ok"], error: ["s-failed", "error"], running: ["s-running", "running"],
  none: ["s-canceled", "no result"] };

function callBody(c) {
  const r = c.result?.data;
  return [
    c.call ? [h("h4", {}, "Input"), inputView(c.call.data?.input)] : null,
    r ? [h("h4", {}, r.is_error ? "Error" : "Result"),
      h("pre", { class: `output${r.is_error ? " is-error" : ""}` }, r.content ?? "")]
      : h("p", { class: "muted small" }, callState(c) === "running" ? "Waiting for the result…" : "No result was recorded."),
  ];
}

function drawCall(c) {
  const d = c.call?.data || {};
  const name = d.name || c.result?.data?.name || "tool";
  const state = callState(c);
  if (!c.li) {
    const details = h("details", {}, h("summary", {}), h("div", { class: "tool-body" }));
    details.addEventListener("toggle", () => { if (details.open) fill(details.lastElementChild, callBody(c)); });
    c.li = h("li", { class: "tool-call", dataset: { callId: c.id } }, details);
  }
  Object.assign(c.li.dataset, { name, state });
  const where = [d.subtask !== null && d.subtask !== undefined ? `subtask ${Number(d.subtask) + 1}` : null,
    d.turn !== undefined && d.turn !== null ? `turn ${d.turn}` : null].filter(Boolean).join(" · ");
  const [cls, label] = CALL_BADGE[state];
  const details = c.li.firstElementChild;
  fill(details.firstElementChild, h("span", { class: "tool-name" }, name), " ",
    h("span", { class: "tool-input" }, inputSummary(name, d.input)), " ",
    where ? h("span", { class: "tool-where muted small" }, where) : null, " ",
    h("span", { class: `badge ${cls}` }, label));
  if (details.open) fill(details.lastElementChild, callBody(c));
  place(callList, c.li, (c.call || c.result).id);
}

function takeCall(e) {
  const id = String(e.data?.call_id ?? `event-${e.id}`);
  const c = calls.get(id) || { id, call: null, result: null, li: null };
  calls.set(id, c);
  if (e.type === "tool_call") {
    c.call = e;
    const s = e.data?.subtask;
    if (!lastSubtask || lastSubtask.id < e.id) { lastSubtask = { id: e.id, subtask: s ?? null }; dirty.add("plan"); }
  } else c.result = e;
  drawCall(c);
  dirty.add("lists");
}

// ---- verification rounds and the switches to debug mode, in the order they happened ---------
function roundItem(e) {
  const d = e.data || {};
  if (e.type === "debug_mode") {
    return h("li", { class: "debug-switch", dataset: { kind: "debug_mode" } },
      h("span", { class: "badge debug" }, "debug mode"), " ",
      h("span", {}, "The agent switched to root-cause debugging after this error:"),
      h("pre", { class: "output is-error" }, d.error ?? ""));
  }
  const commands = Array.isArray(d.commands) ? d.commands : [];
  return h("li", { class: `verify-round ${d.passed ? "passed" : "failed"}`,
    dataset: { kind: "verify", round: d.round ?? "", passed: String(Boolean(d.passed)), selfReview: String(Boolean(d.self_review)) } },
    h("div", { class: "verify-head" }, h("strong", {}, d.baseline ? "Baseline (before any edit)" : `Round ${d.round ?? "?"}`), " ",
      h("span", { class: `badge ${d.passed ? "s-completed" : "s-failed"}` }, d.passed ? "passed" : "failed"), " ",
      d.self_review ? h("span", { class: "badge self-review", title: "The agent reviewed its own change" }, "self-review") : null),
    commands.length ? h("ul", { class: "commands" }, commands.map((c) => h("li", {}, h("code", {}, String(c)))))
      : h("p", { class: "muted small" }, "No command was run."),
    d.output ? h("details", {}, h("summary", {}, "Output"), h("pre", { class: "output" }, d.output)) : null);
}

// ---- the small parts, drawn again whole when they change ------------------------------------
function drawPhases() {
  const last = new Map();
  for (const e of phases) {
    const d = e.data || {};
    if (d.phase) last.set(d.phase, { status: d.status, detail: d.detail ?? last.get(d.phase)?.detail });
  }
  const names = [...PHASES, ...[...last.keys()].filter((p) => !PHASES.includes(p))];
  const ended = job && TERMINAL.has(job.status);
  const reached = Math.max(-1, ...names.map((p, i) => (last.has(p) ? i : -1)));
  fill($("#coding-phases"), names.map((p, i) => {
    const s = last.get(p);
    const state = !s ? (i < reached ? "skipped" : "pending") : s.status === "completed" ? "done"
      : s.status === "failed" ? "stopped"
      : ended ? "stopped" : "running";
    return h("li", { class: `phase ${state}`, dataset: { phase: p, state }, "aria-current": state === "running" ? "step" : null },
      h("span", { class: "phase-dot", "aria-hidden": "true" }, state === "done" ? "✓" : String(i + 1)),
      h("span", { class: "phase-text" }, h("span", { class: "phase-name" }, p),
        h("span", { class: "sr-only" }, `: ${PHASE_STATE[state]}`),
        s?.detail ? h("span", { class: "phase-detail muted small" }, s.detail) : null));
  }));
}

function drawPlan() {
  const d = latest.plan?.data;
  const subtasks = Array.isArray(d?.subtasks) ? d.subtasks : [];
  const current = job && TERMINAL.has(job.status) ? null : lastSubtask?.subtask; // none once it ended
  fill($("#coding-plan"), !d ? empty("No plan yet.") : [
    d.fallback ? h("p", { class: "small" }, h("span", { class: "badge s-waiting" }, "fallback plan"), " ",
      h("span", { class: "muted" }, "The planner's own plan could not be used; the task is worked on as planned here.")) : null,
    subtasks.length ? h("ol", { class: "subtasks" }, subtasks.map((s, i) =>
      h("li", { class: i === current ? "current" : null, "aria-current": i === current ? "step" : null, dataset: { index: i } },
        h("strong", {}, s?.title ?? `Subtask ${i + 1}`),
        s?.description ? h("p", { class: "muted small" }, s.description) : null))) : empty("The plan has no subtask."),
  ]);
}

function drawLists() {
  const all = [...calls.values()];
  const errors = all.filter((c) => c.result?.data?.is_error).length;
  $("#coding-calls-count").textContent = all.length ? `(${all.length}${errors ? `, ${errors} failed` : ""})` : "";
  $("#coding-calls-empty").hidden = all.length > 0;
  $("#coding-verify-empty").hidden = roundList.children.length > 0;
}

function prLink(url, number, branch) {
  if (!httpUrl(url)) return null;
  return h("a", { class: "pr-link", href: url, rel: "noopener noreferrer" },
    number ? `Pull request #${number}` : "Pull request", branch ? [" ", h("span", { class: "muted" }, "from "), h("code", {}, branch)] : null);
}

function fact(label, value, attrs) {
  return value === null || value === undefined || value === "" ? null
    : h("div", attrs || {}, h("dt", {}, label), h("dd", {}, value));
}

// The verdict, in the colour it deserves: a job that "completed" with an unverified change
// must never look like a success.
const VERDICTS = { verified: ["s-completed", "verified: the checks pass"],
  unverified: ["s-failed", "unverified: the checks fail"], "self-reviewed": ["s-waiting", "self-reviewed: nothing to run"],
  unchanged: ["s-waiting", "unchanged: the agent changed nothing"] };

function testList(names) {
  return Array.isArray(names) && names.length
    ? h("ul", { class: "tests" }, names.slice(0, 20).map((t) => h("li", {}, h("code", {}, t)))) : null;
}

function outcomeFacts(r) {
  const tests = r.tests_passed === true ? h("span", { class: "badge s-completed" }, "passed")
    : r.tests_passed === false ? h("span", { class: "badge s-failed" }, "failing") : r.tests_passed === null ? "not run" : null;
  const files = Array.isArray(r.files) ? h("ul", { class: "mvp-files" }, r.files.map((f) =>
    h("li", {}, h("code", {}, typeof f === "string" ? f : f?.path ?? JSON.stringify(f))))) : null;
  const deploy = r.deploy && typeof r.deploy === "object"
    ? [httpUrl(r.deploy.url) ? h("a", { href: r.deploy.url, rel: "noopener noreferrer" }, r.deploy.url) : null, pretty(r.deploy)]
    : r.deploy ?? null;
  return [
    fact("Branch", r.branch ? h("code", {}, r.branch) : null),
    fact("Commit", r.commit ? h("code", { title: r.commit }, short(r.commit)) : null),
    fact("Iterations", r.iterations ?? null),
    fact("Tests", tests),
    fact("Failing before", testList(r.baseline), { class: "baseline" }),
    fact("Fixed", testList(r.fixed), { class: "fixed" }),
    fact("Broken", testList(r.broken), { class: "broken" }),
    fact("Setup", r.setup?.status ? `${r.setup.status}${r.setup.kinds?.length ? ` (${r.setup.kinds.join(", ")})` : ""}`
      + (typeof r.setup.seconds === "number" && r.setup.status === "installed" ? ` in ${r.setup.seconds.toFixed(1)} s` : "") : null),
    fact("Subtasks", Array.isArray(r.subtasks) ? r.subtasks.length : r.subtasks ?? null),
    fact("Tokens in", r.tokens_in ?? null, { class: "tokens-in" }),
    fact("Tokens out", r.tokens_out ?? null, { class: "tokens-out" }),
    fact("Cost", typeof r.cost_usd === "number" ? `$${r.cost_usd.toFixed(4)}` : null, { class: "cost" }),
    fact("Files", files),
    fact("Deploy", deploy),
  ];
}

function drawOutcome() {
  const pr = latest.pull_request?.data;
  const r = job?.result && typeof job.result === "object" ? job.result : null;
  const link = pr ? prLink(pr.url, pr.number, pr.branch) : r ? prLink(r.pr_url) : null;
  const debug = debugSwitches > 0 || Boolean(r?.debug_mode);
  const verdict = VERDICTS[r?.verdict];
  fill($("#coding-badges"),
    verdict ? h("span", { class: `badge ${verdict[0]}`, id: "coding-verdict", dataset: { verdict: r.verdict } }, verdict[1]) : null,
    r?.draft ? h("span", { class: "badge s-waiting", title: "Opened as a draft: its verification failed" }, "draft pull request") : null,
    debug ? h("span", { class: "badge debug", id: "coding-debug", title: "The agent switched to root-cause debugging" }, "debug mode") : null,
    r?.resumed ? h("span", { class: "badge s-waiting", title: "Resumed from its last checkpoint after an interruption" }, "resumed") : null);
  fill($("#coding-outcome"),
    link ? h("p", { class: "pr" }, link) : null,
    r ? h("dl", { class: "facts" }, outcomeFacts(r))
      : job && !TERMINAL.has(job.status) ? h("p", { class: "muted small" }, "Tokens and cost so far: see LLM usage below.") : null);
}

function drawDiff() {
  const d = latest.diff?.data;
  fill($("#coding-diff"), d ? diffView(d) : empty("No diff yet."));
}

function flush() {
  flushing = null;
  if (dirty.has("phases")) drawPhases();
  if (dirty.has("plan")) drawPlan();
  if (dirty.has("lists")) drawLists();
  if (dirty.has("outcome")) drawOutcome();
  if (dirty.has("diff")) drawDiff();
  dirty.clear();
}
const schedule = () => { flushing = flushing || setTimeout(flush, 30); };

// ---- events in --------------------------------------------------------------------------------
function take(e) {
  if (!TYPES.includes(e.type) || seen.has(e.id)) return;
  seen.add(e.id);
  if (e.type === "phase") {
    phases.push(e);
    phases.sort(byId);
    dirty.add("phases");
  } else if (e.type in latest) {
    if (!latest[e.type] || latest[e.type].id < e.id) latest[e.type] = e;
    dirty.add(e.type === "diff" ? "diff" : e.type === "plan" ? "plan" : "outcome");
  } else if (e.type === "tool_call" || e.type === "tool_result") {
    takeCall(e);
  } else {
    if (e.type === "debug_mode") { debugSwitches += 1; dirty.add("outcome"); }
    place(roundList, roundItem(e), e.id);
    dirty.add("lists");
  }
  schedule();
}

async function loadHistory() {
  let before = null;
  do {
    const q = before === null ? "" : `&before=${before}`;
    const page = await api("GET", `/api/jobs/${enc}/events/history?limit=500&types=${TYPES.join(",")}${q}`);
    for (const e of page.items) take(e);
    before = page.next;
  } while (before !== null);
}

const onEvent = (e) => {
  if (queued) queued.push(e);
  else if (isCoding(job)) take(e);
};
for (const type of TYPES) subscribe(type, onEvent);

function onJob(detail) {
  const first = job === null;
  job = detail;
  if (!isCoding(job)) { queued = null; return; }
  for (const c of calls.values()) if (!c.result) drawCall(c); // once it ends, none is coming
  ["phases", "outcome", "lists", "plan", "diff"].forEach((k) => dirty.add(k));
  schedule();
  if (!first) return;
  box.hidden = false;
  const early = queued;
  queued = null;
  for (const e of early) take(e);
  loadHistory().catch((err) => fail(new Error(`The coding history could not be read: ${err.message}`)));
}

subscribe("job", ({ job: detail }) => onJob(detail));
// job.js may have told the job before this module ran: the browser runs other tasks between
// deferred scripts while one (this, with its imports) is still loading. Then ask for it here.
api("GET", `/api/jobs/${enc}`).then((j) => { if (job === null) onJob(j); }).catch(() => {});
