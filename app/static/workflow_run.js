/* A workflow run's page: its DAG with each step's live status, the gated steps' Approve and Reject,
   and a table of the steps. The run job's own event stream says when to look again (the driver
   records a step each round, and its status moves as it waits and resumes); a slow poll covers
   a stream that could not be opened. */
import { api, h, $, fill, time, badge, jobLink, pretty, empty } from "./ui.js";
import { drawDag } from "./dag.js";
import { follow, nameProject, stepCells } from "./followed_page.js";
import { pendingApprovals, decisionButtons } from "./gate.js";
import { TERMINAL } from "./job_kinds.js";

const jid = $("#run").dataset.jobId;
const enc = encodeURIComponent(jid);
let run = null;
let specSteps = new Map(); // the run's spec by step name: each step's job type and dependencies
let projectId = null;
let drawnAs = ""; // the graph is drawn again only when a status changed (keeps focus and hover)

function renderHead() {
  $("#r-name").textContent = run.name || "(deleted workflow)";
  $("#r-version").textContent = run.version ? `v${run.version}` : "";
  fill($("#r-status"), badge(run.status));
  document.title = `${run.name || "Workflow"} · ${run.status} · Switchyard`;
  fill($("#r-meta"),
    h("span", {}, h("span", { class: "muted" }, "run job "), jobLink(run.job_id)),
    h("span", {}, h("span", { class: "muted" }, "started "), time(run.created_at)),
    run.completed_at ? h("span", {}, h("span", { class: "muted" }, "finished "), time(run.completed_at)) : null);
  const err = $("#r-error");
  err.hidden = !run.error;
  err.textContent = run.error || "";
  fill($("#r-inputs"), pretty(run.inputs));
}

function renderGraph() {
  const nodes = Object.entries(run.steps).map(([name, s]) => ({
    id: name, status: s.status, depends_on: specSteps.get(name)?.depends_on || [],
    detail: specSteps.get(name)?.job_type,
    href: s.job_id ? `/jobs/${s.job_id}` : s.status === "waiting_approval" ? `#gate-${name}` : null,
  }));
  const signature = JSON.stringify(nodes);
  if (signature === drawnAs) return;
  drawnAs = signature;
  fill($("#dag"), nodes.length ? drawDag(nodes, `Steps of workflow ${run.name || ""}`) : empty("No steps."));
}

function renderSteps() {
  fill($("#run-steps"), Object.entries(run.steps).map(([name, s]) => h("tr", { dataset: { step: name, status: s.status } },
    h("th", { scope: "row" }, h("span", { class: "mono" }, name), " ",
      h("span", { class: "type muted" }, specSteps.get(name)?.job_type || "")),
    stepCells(s))));
}

async function renderGates() {
  const waiting = Object.entries(run.steps).filter(([, s]) => s.status === "waiting_approval" && s.approval_id);
  $("#gates-card").hidden = !waiting.length;
  if (!waiting.length) { fill($("#gates")); return; }
  const pending = await pendingApprovals(projectId);
  fill($("#gates"), waiting.map(([name, s]) => {
    const a = pending.get(s.approval_id);
    return h("article", { class: "approval pending", id: `gate-${name}`, dataset: { step: name, id: s.approval_id } },
      h("h3", {}, a?.title || `Step ${name}`),
      a ? [h("p", { class: "meta" }, h("span", { class: "muted" }, "runs "), h("code", {}, a.action_args?.job_type || ""),
        " · requested ", time(a.created_at), a.expires_at ? [" · expires ", time(a.expires_at)] : null),
      h("details", { open: true }, h("summary", {}, "Payload, as it will run"), pretty(a.action_args?.payload)),
      decisionButtons(a, load)]
        : h("p", { class: "muted" }, "Decided, or no longer pending: refreshing…"));
  }));
}

async function read() {
  run = await api("GET", `/api/workflow-runs/${enc}`);
  specSteps = new Map((run.spec?.steps || []).map((s) => [s.name, s]));
  if (projectId === null) {
    projectId = (await api("GET", `/api/jobs/${enc}`)).project_id;
    nameProject(projectId);
  }
  renderHead();
  renderGraph();
  renderSteps();
  await renderGates();
  return { ended: TERMINAL.has(run.status), jobId: jid };
}

const load = follow(read, $("#run-body"), "This workflow run does not exist, or it is not yours.");
