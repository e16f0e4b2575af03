/* A job: header, diagnosis, steps timeline, payload/result, events (live), retry and cancel.
   The job as read is published on the bus as "job" (usage.js, checks.js, coding.js, …), and each
   event of its stream by its type (coding.js). */
import { api, h, $, clear, fill, time, badge, stepOutcome, jobLink, pretty, empty, busy, flash, fail,
  debounce, duration, between, short, stream } from "./ui.js";
import { publish } from "./bus.js";
import { TERMINAL } from "./job_kinds.js";
// The job page's parts, imported first: each has subscribed before the job is published.
import "./usage.js";
import "./checks.js";
import "./coding.js";
import "./job_links.js";
import "./function_calls.js";
import "./trajectory.js";
import "./rerun.js";

{
  const jid = $("#job").dataset.jobId;
  const enc = encodeURIComponent(jid);
  let job = null;
  let projectName = null;

  function renderHeader() {
    $("#j-type").textContent = job.job_type;
    // A coding job's verdict colours its status: "completed" with an unverified change is red.
    const verdict = job.status === "completed" && job.result && job.result.verdict;
    fill($("#j-status"), verdict === "unverified"
      ? h("span", { class: "badge s-failed", dataset: { verdict } }, "completed: unverified")
      : verdict === "verified" ? h("span", { class: "badge s-completed", dataset: { verdict } }, "completed: verified")
        : verdict === "unchanged" ? h("span", { class: "badge s-waiting", dataset: { verdict } }, "completed: nothing changed")
          : badge(job.status));
    document.title = `Job ${short(job.id)} · ${job.status} · Switchyard`;
    const link = $("#project-link");
    link.href = `/projects/${job.project_id}`;
    link.textContent = projectName || short(job.project_id);
    const took = between(job.started_at, job.completed_at);
    fill($("#j-meta"),
      h("span", {}, h("span", { class: "muted" }, "attempts "), `${job.attempts}/${job.max_attempts}`),
      h("span", {}, h("span", { class: "muted" }, "priority "), String(job.priority)),
      h("span", {}, h("span", { class: "muted" }, "created "), time(job.created_at)),
      job.started_at ? h("span", {}, h("span", { class: "muted" }, "started "), time(job.started_at)) : null,
      job.completed_at ? h("span", {}, h("span", { class: "muted" }, "finished "), time(job.completed_at)) : null,
      took !== null ? h("span", {}, h("span", { class: "muted" }, TERMINAL.has(job.status) ? "took " : "running for "), duration(took)) : null,
      job.parent_job_id ? h("span", {}, h("span", { class: "muted" }, "parent "), jobLink(job.parent_job_id)) : null,
      job.rerun_of ? h("span", {}, h("span", { class: "muted" }, "rerun of "), jobLink(job.rerun_of)) : null,
      h("span", { class: "mono muted small", title: "Full job id" }, job.id));
    $("#retry").disabled = job.status !== "failed";
    $("#cancel").disabled = TERMINAL.has(job.status);
    const err = $("#last-error");
    err.hidden = !job.last_error;
    err.textContent = job.last_error ? `Last error: ${job.last_error}` : "";
  }

  function renderSteps() {
    const list = clear($("#timeline"));
    if (!job.steps || !job.steps.length) {
      list.append(h("li", { class: "empty" }, job.status === "queued" ? "No step has run yet: the job is waiting for a worker."
        : TERMINAL.has(job.status) ? "This job finished without recording a step." : "No step recorded yet."));
      return;
    }
    for (const s of job.steps) {
      const took = between(s.started_at, s.finished_at);
      const hasOutput = s.output !== null && s.output !== undefined;
      list.append(h("li", { class: `step s-${s.status}`, dataset: { seq: s.seq, status: s.status } },
        h("span", { class: "dot", "aria-hidden": "true" }),
        h("div", { class: "step-body" },
          h("div", { class: "step-head" },
            h("span", { class: "seq muted" }, `#${s.seq}`), " ", h("strong", { class: "name" }, s.name), " ",
            badge(s.status), " ",
            h("span", { class: "muted" }, s.finished_at ? duration(took) : `running ${duration(took)}`),
            s.attempts > 1 ? h("span", { class: "badge s-waiting", title: "How many times this step ran" }, `${s.attempts} attempts`) : null,
            h("span", { class: "small" }, time(s.started_at))),
          s.error ? h("p", { class: "error" }, s.error) : null,
          hasOutput ? h("details", {}, h("summary", {}, "Output"), pretty(s.output))
            : s.output_truncated ? cutOutput(s) : null)));
    }
  }

  // A large output comes as a preview and a link (GET /api/jobs/<jid>/steps/<seq>): the
  // whole is fetched only when asked for, so a job page never loads a step's megabytes.
  function cutOutput(s) {
    const body = h("div", { class: "step-output" },
      h("pre", { class: "json" }, `${s.output_preview}…`));
    const load = h("button", { type: "button", class: "secondary small" },
      `Load the whole output (${Math.ceil(s.output_bytes / 1024)} KiB)`);
    load.addEventListener("click", () => busy(load, async () => {
      const whole = await api("GET", s.output_url);
      fill(body, pretty(whole.output));
      load.remove();
    }));
    return h("details", { dataset: { cut: "true" } },
      h("summary", {}, `Output (cut: ${Math.ceil(s.output_bytes / 1024)} KiB)`), body, load);
  }

  async function renderDiagnosis() {
    try {
      const d = await api("GET", `/api/jobs/${enc}/diagnosis`);
      fill($("#diagnosis"), h("span", {}, d.summary), " ",
        h("span", { class: "muted small" }, `(${d.reason}, checked `, time(d.checked_at), ")"));
      $("#diagnosis-card").dataset.reason = d.reason;
    } catch (e) {
      fill($("#diagnosis"), h("span", { class: "muted" }, `No diagnosis: ${e.message}`));
    }
  }

  async function load() {
    job = await api("GET", `/api/jobs/${enc}`);
    if (projectName === null) {
      projectName = "";
      api("GET", `/api/projects/${encodeURIComponent(job.project_id)}`)
        .then((p) => { projectName = p.name; renderHeader(); }).catch(() => {});
    }
    renderHeader();
    renderSteps();
    publish({ type: "job", job });
    fill($("#payload"), pretty(job.payload));
    fill($("#result"), job.result === null || job.result === undefined
      ? empty(TERMINAL.has(job.status) ? "No result." : "No result yet.") : pretty(job.result));
    await renderDiagnosis();
  }
  const reload = debounce(() => load().catch(fail), 250);

  // ---- events: the last TAIL at first, older ones on demand, each shown once
  const TAIL = 200;
  const events = $("#events");
  const eventsOlder = $("#events-older");
  const shown = new Set();
  let source = null;
  let lastEventId = 0;
  let oldestEventId = null;
  function listen() {
    if (source) source.close();
    const from = lastEventId ? `cursor=${lastEventId}` : `tail=${TAIL}`;
    source = stream(`/api/jobs/${enc}/events?${from}`, onEvent, $("#live"));
  }
  // The server ends a job's stream at a terminal status, the first one even when the job was
  // retried since: listen again from there unless this is the job's latest end.
  async function afterTerminal(e) {
    source.close();
    await load().catch(fail);
    if (job && (!TERMINAL.has(job.status) || Date.parse(job.completed_at) > Date.parse(e.created_at))) {
      listen();
      return;
    }
    const live = $("#live");
    live.dataset.state = "closed";
    live.textContent = "finished";
  }
  function eventItem(e) {
    const label = e.type === "status" ? [stepOutcome(e), badge(e.data?.status || e.message)]
      : e.type === "delta" ? h("span", { class: "delta" }, e.message) : h("span", {}, e.message);
    return h("li", { class: `ev ev-${e.type}`, dataset: { eventId: e.id } },
      h("span", { class: "ev-type muted" }, e.type), h("span", { class: "ev-body" }, label), time(e.created_at));
  }
  function show(e, older) {
    oldestEventId = oldestEventId === null ? e.id : Math.min(oldestEventId, e.id);
    if (shown.has(e.id)) return false;
    shown.add(e.id);
    $("#events-empty").hidden = true;
    eventsOlder.hidden = false;
    // Oldest first; a late event (committed after later ones were shown) goes where its id says.
    const last = events.lastElementChild;
    const next = older ? events.firstElementChild : !last || Number(last.dataset.eventId) < e.id ? null
      : [...events.children].find((li) => Number(li.dataset.eventId) > e.id);
    events.insertBefore(eventItem(e), next || null);
    return true;
  }
  function onEvent(e) {
    publish(e);
    lastEventId = Math.max(lastEventId, e.id);
    if (e.type === "status" && TERMINAL.has(e.data?.status)) afterTerminal(e);
    if (show(e, false) && (e.type === "status" || e.type === "step")) reload();
  }
  eventsOlder.addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
    const q = oldestEventId === null ? "" : `&before=${oldestEventId}`;
    const page = await api("GET", `/api/jobs/${enc}/events/history?limit=100${q}`);
    for (const e of page.items) show(e, true); // newest first: each goes on top
    if (page.next === null) eventsOlder.hidden = true;
  }));

  $("#retry").addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
    await api("POST", `/api/jobs/${enc}/retry`);
    flash(`Job ${short(jid)} queued again.`, "ok");
    await load();
    listen();
  }));
  $("#cancel").addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
    const j = await api("POST", `/api/jobs/${enc}/cancel`);
    flash(j.status === "canceled" ? `Job ${short(jid)} canceled.` : `Cancel requested: the job stops at its next step.`, "ok");
    await load();
  }));

  // The diagnosis of a job that waits depends on the clock: look again now and then.
  setInterval(() => { if (job && !TERMINAL.has(job.status) && !document.hidden) renderDiagnosis(); }, 10000);

  load().then(listen).catch((e) => {
    fill($("#job-body"), h("div", { class: "card" },
      h("p", { class: "error", role: "alert" }, e.status === 404 ? "This job does not exist, or it is not yours." : e.message),
      h("p", {}, h("a", { href: "/" }, "Back to your projects"))));
    $("#live").hidden = true;
  });
}
