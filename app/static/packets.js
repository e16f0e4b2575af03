/* The phase packets on the project page: what the agents found and propose, each proposed
   action with the state of its approval. */
import { api, h, $, fill, time, badge, jobLink, pretty, empty, debounce } from "./ui.js";
import { subscribe } from "./bus.js";
import { touchesProject } from "./job_kinds.js";
import { knownType } from "./jobs_table.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const PHASES = ["idea", "validation", "build", "launch", "growth"]; // tasks/startup/phases.py

function actionItem(a) {
  const ap = a.approval;
  return h("li", { class: "packet-action", dataset: { type: a.type, approvalStatus: ap ? ap.status : "none" } },
    h("div", {}, h("strong", {}, a.title), " ", h("code", { class: "action-type" }, a.type)),
    h("div", { class: "meta small" },
      ap ? [h("span", { class: "muted" }, "approval "), badge(ap.status)] : h("span", { class: "muted" }, "no approval yet"),
      ap && ap.execution_status !== "idle" ? [h("span", { class: "muted" }, "execution "), badge(ap.execution_status)] : null,
      ap && ap.execution_job_id ? jobLink(ap.execution_job_id) : null),
    h("details", {}, h("summary", {}, "Arguments"), pretty(a.args)));
}

function packetCard(p, open) {
  const body = [
    h("p", { class: "packet-summary" }, p.summary),
    p.insights.length ? [h("h4", {}, "Insights"), h("ul", { class: "insights" }, p.insights.map((i) => h("li", {}, i)))] : null,
    h("h4", {}, `Proposed actions (${p.actions.length})`),
    p.actions.length ? h("ol", { class: "packet-actions" }, p.actions.map(actionItem)) : empty("No action proposed."),
  ];
  const meta = h("span", { class: "meta small" }, h("span", { class: "badge packet-phase" }, PHASES[p.phase] ?? `phase ${p.phase}`),
    time(p.created_at), h("span", {}, h("span", { class: "muted" }, "from "), jobLink(p.job_id)));
  return h("article", { class: "packet", dataset: { id: p.id, phase: p.phase } },
    open ? [h("h3", { class: "packet-title" }, p.title), meta, body]
      : h("details", {}, h("summary", {}, h("span", { class: "packet-title" }, p.title), " ", meta), body));
}

async function load() {
  const { items } = await api("GET", `/api/projects/${enc}/packets`);
  fill($("#packets"), items.length ? items.map((p, i) => packetCard(p, i === 0))
    : empty("No packet yet. Press Launch: the agents research the project and write one, with actions for you to approve."));
}

const reload = debounce(panel("overview", load), 500);
// A decision enqueues its execution (a status event), a packet job ends with a log line.
subscribe("job", ({ job }) => { if (touchesProject(job.job_type)) reload(); });
subscribe("log", (e) => { if (e.live && touchesProject(knownType(e.job_id))) reload(); });
