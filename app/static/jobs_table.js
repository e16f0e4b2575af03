/* The project page's jobs table: newest first, as the API lists them, and at most a page. A job
   created anywhere (the API, the CLI, a spawn, beat) comes in by its first status event; one
   older than the last row belongs on a later page. Every row carries data-job-id and data-status. */
import { api, h, $, fill, time, badge, jobLink, empty, fail, duration, between, breakable } from "./ui.js";
import { publish } from "./bus.js";
import { TERMINAL } from "./job_kinds.js";
import { panel } from "./sections.js";

const JOB_PAGE = 50;
const enc = encodeURIComponent($("#project").dataset.projectId);
const rows = new Map(); // job id -> { job, tr }
const offPage = new Set(); // jobs older than the table's last row: not fetched again
const jobsBox = $("#jobs");
const filter = $("#jobs-filter");
let tbody = null;
let listed = false; // the table is drawn once the Jobs section is first shown; until then a job
                   // read for the other panels is only remembered
// Jobs read while the list is out: its answer may be older than theirs, so they are read again
// once it is in (else a row could stay at the status before its last event).
let readDuring = null;

function jobCells(job, tr) {
  const last = job.steps?.length ? job.steps[job.steps.length - 1] : null;
  const progress = last ? `${last.name} ${last.status}`
    : tr?.querySelector(".progress")?.textContent || (TERMINAL.has(job.status) ? "" : "—");
  return [
    h("td", {}, jobLink(job.id)),
    h("td", { class: "type" }, breakable(job.job_type)),
    h("td", {}, badge(job.status)),
    h("td", { class: "progress muted wide-only" }, progress),
    h("td", { class: "num wide-only" }, `${job.attempts}/${job.max_attempts}`),
    h("td", { class: "wide-only" }, time(job.created_at)),
    h("td", { class: "num" }, duration(between(job.started_at, job.completed_at))),
  ];
}

/** The API's order: created_at, then id, both descending. */
function newer(a, b) {
  const ta = Date.parse(a.created_at), tb = Date.parse(b.created_at);
  return ta !== tb ? ta > tb : a.id > b.id;
}

function leavePage(id) {
  offPage.add(id);
  if (offPage.size > 2000) offPage.delete(offPage.values().next().value);
}

// The type of each job read, listed or not (a filtered-out job's too), for knownType().
const types = new Map();
function rememberType(job) {
  types.set(job.id, job.job_type);
  if (types.size > 2000) types.delete(types.keys().next().value);
}

/** Update a listed job's row, or insert a new one where the table's order puts it. */
function upsertRow(job) {
  const existing = rows.get(job.id);
  rememberType(job);
  addJobType(job.job_type);
  readDuring?.add(job.id);
  if (!listed) return;
  if (!existing && filter.value && job.status !== filter.value) return;
  ensureTable();
  const tr = existing ? existing.tr : h("tr", { dataset: { jobId: job.id } });
  tr.dataset.status = job.status;
  tr.replaceChildren(...jobCells(job, existing?.tr));
  rows.set(job.id, { job, tr });
  if (existing) return;
  const before = [...tbody.children].find((el) => el !== tr && newer(job, rows.get(el.dataset.jobId).job));
  tbody.insertBefore(tr, before || null); // past a full page's end: trimmed off at once
  while (rows.size > JOB_PAGE) {
    const last = tbody.lastElementChild;
    rows.delete(last.dataset.jobId);
    leavePage(last.dataset.jobId);
    last.remove();
  }
}

function ensureTable() {
  if (tbody) return;
  tbody = h("tbody");
  fill(jobsBox, h("div", { class: "table-wrap" }, h("table", { class: "jobs" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Type"),
      h("th", { scope: "col" }, "Status"), h("th", { scope: "col", class: "wide-only" }, "Last step"),
      h("th", { scope: "col", class: "wide-only" }, "Attempts"),
      h("th", { scope: "col", class: "wide-only" }, "Created"), h("th", { scope: "col" }, "Took"))),
    tbody)));
}

async function loadJobs() {
  const q = filter.value ? `&status=${encodeURIComponent(filter.value)}` : "";
  const during = (readDuring = new Set());
  let data;
  try {
    data = await api("GET", `/api/projects/${enc}/jobs?limit=${JOB_PAGE}${q}`);
  } finally {
    readDuring = null;
  }
  rows.clear();
  offPage.clear();
  tbody = null;
  listed = true;
  jobsBox.removeAttribute("aria-busy");
  if (!data.items.length) {
    fill(jobsBox, empty(filter.value ? `No ${filter.value} jobs.`
      : "No jobs yet. Submit one below, or press Launch."));
  }
  for (const job of data.items) upsertRow(job);
  for (const id of during) refreshJob(id);
}
filter.addEventListener("change", panel("jobs", loadJobs)); // one list read at a time

// One GET per job at a time: events that come while it is out ask for one more after it,
// so the row ends at the state of the last event, and a burst costs at most two.
const fetching = new Map(); // job id -> whether another GET is wanted after this one
async function refreshJob(id) {
  if (fetching.has(id)) { fetching.set(id, true); return; }
  try {
    do {
      fetching.set(id, false);
      const job = await api("GET", `/api/jobs/${encodeURIComponent(id)}`);
      upsertRow(job);
      publish({ type: "job", job });
    } while (fetching.get(id));
  } catch (e) { /* gone, or not ours to see */ } finally {
    fetching.delete(id);
  }
}

/** A job this page just made (a launch, a submitted job, an approval's execution). */
export async function addJob(id) {
  try {
    const job = await api("GET", `/api/jobs/${encodeURIComponent(id)}`);
    upsertRow(job);
    publish({ type: "job", job });
  } catch (e) { fail(e); }
}

/** The type of a job the table has read, else null. */
export function knownType(id) {
  return rows.get(id)?.job.job_type ?? types.get(id) ?? null;
}

// The job form's list of types: every type the table has shown.
const knownTypes = new Set(["system.canary"]);
function addJobType(t) {
  if (knownTypes.has(t)) return;
  knownTypes.add(t);
  $("#job-types").append(h("option", { value: t }));
}

/** A job's step or status event: its row follows; a job not listed may come in. */
export function onJobEvent(e) {
  const row = rows.get(e.job_id);
  if (e.type === "step" && row) {
    // A step's outcome names the step its statement started (`next`); a fast step announces
    // no start of its own (API: every outcome arrives, a start only when the step is slow).
    const next = e.data?.next;
    row.tr.querySelector(".progress").textContent = next ? `${next.name} running`
      : `${e.data?.name} ${e.data?.status}`;
  }
  if (e.type !== "status") return;
  // A run's last step outcome rides on the job's move (`data.step`), not on a step event.
  const step = e.data?.step;
  if (step && row) row.tr.querySelector(".progress").textContent = `${step.name} ${step.status}`;
  const status = e.data?.status;
  const moved = row && row.job.status !== status; // else the list already showed it
  if (moved) {
    row.job.status = status;
    row.tr.dataset.status = status;
    row.tr.querySelector(".badge").replaceWith(badge(status));
  }
  // A job not listed (created anywhere: the API, the CLI, a spawn, beat) comes in here; one the
  // filter hides is read too (the panels hear of it as "job"), and left out by upsertRow.
  const fits = row ? moved : !offPage.has(e.job_id);
  if (!e.live) return;
  if (fits) refreshJob(e.job_id);
  else if (!row) publish({ type: "job", job: { id: e.job_id, status, job_type: types.get(e.job_id) ?? null } });
}
