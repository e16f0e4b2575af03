/* A plan's page: its task DAG with live statuses, its versions, and while it awaits approval the
   editor and the decision. The plan's job (it generates the plan, waits for the approval and
   drives the tasks) streams an event at each move: each one is a cue to read the plan again. */
import { api, h, $, fill, time, badge, jobLink, empty, busy, flash } from "./ui.js";
import { drawDag } from "./dag.js";
import { follow, nameProject, stepCells } from "./followed_page.js";
import { pendingApprovals, decisionButtons } from "./gate.js";
import { showEditor, saveEdits, isDirty } from "./plan_editor.js";

const planId = $("#plan").dataset.planId;
const enc = encodeURIComponent(planId);
const ENDED = new Set(["completed", "failed", "rejected", "canceled"]);
let plan = null;
let drawnAs = "";

function renderHead() {
  $("#pl-name").textContent = plan.name;
  $("#pl-version").textContent = plan.version ? `v${plan.version}` : "";
  fill($("#pl-status"), badge(plan.status));
  $("#pl-goal").textContent = plan.goal;
  document.title = `${plan.name} · ${plan.status} · Switchyard`;
  fill($("#pl-meta"),
    plan.job_id ? h("span", {}, h("span", { class: "muted" }, "plan job "), jobLink(plan.job_id)) : null,
    plan.repo_url ? h("span", {}, h("span", { class: "muted" }, "repository "), h("code", {}, plan.repo_url)) : null,
    plan.auto_approve ? h("span", { class: "badge" }, "auto-approved") : null,
    plan.revisions ? h("span", {}, h("span", { class: "muted" }, "revisions "), String(plan.revisions)) : null,
    h("span", {}, h("span", { class: "muted" }, "created "), time(plan.created_at)));
  const err = $("#pl-error");
  err.hidden = !plan.error;
  err.textContent = plan.error || "";
}

function renderTasks() {
  const nodes = plan.tasks.map((t) => ({ id: t.id, status: t.status, depends_on: t.depends_on,
    detail: t.assigned_to, href: t.job_id ? `/jobs/${t.job_id}` : null }));
  const signature = JSON.stringify(nodes);
  if (signature !== drawnAs) {
    drawnAs = signature;
    fill($("#dag"), nodes.length ? drawDag(nodes, `Tasks of plan ${plan.name}`)
      : empty(plan.status === "generating" ? "The planner is writing the plan…" : "No tasks."));
  }
  fill($("#plan-tasks"), plan.tasks.map((t) => h("tr", { dataset: { task: t.id, status: t.status } },
    h("th", { scope: "row" }, h("span", { class: "mono" }, t.id), " ", h("span", { class: "type muted" }, t.assigned_to),
      h("span", { class: "task-desc" }, t.description)),
    stepCells(t))));
  fill($("#plan-versions"), [...plan.versions].reverse().map((v) => h("li", { class: "row", dataset: { version: v.version } },
    h("strong", {}, `v${v.version}`), h("span", { class: "badge" }, v.origin),
    v.reason ? h("span", { class: "muted" }, v.reason) : null, time(v.created_at))));
}

function markDirty(dirty) {
  for (const b of $("#plan-decision").querySelectorAll("button")) b.disabled = dirty;
  const hint = $("#plan-decision .dirty-hint");
  if (hint) hint.hidden = !dirty;
}

async function renderReview() {
  const open = plan.status === "awaiting_approval";
  $("#review-card").hidden = !open;
  if (!open) { fill($("#plan-decision")); return; }
  showEditor(plan, markDirty);
  const approval = plan.approval_id ? (await pendingApprovals(plan.project_id)).get(plan.approval_id) : null;
  fill($("#plan-decision"), approval
    ? [h("p", { class: "meta" }, h("strong", {}, approval.title), " ", h("span", { class: "muted" }, "requested "), time(approval.created_at)),
      h("p", { class: "dirty-hint warn", hidden: true }, "You have unsaved edits: save them as a new version before deciding."),
      decisionButtons(approval, load)]
    : h("p", { class: "muted" }, "Waiting for the plan's approval to appear…"));
  markDirty(isDirty());
}

async function read() {
  const first = plan === null;
  plan = await api("GET", `/api/plans/${enc}`);
  if (first) nameProject(plan.project_id);
  renderHead();
  renderTasks();
  await renderReview();
  return { ended: ENDED.has(plan.status), jobId: plan.job_id };
}

$("#plan-edit").addEventListener("submit", (ev) => {
  ev.preventDefault();
  busy($("#plan-save"), async () => {
    const saved = await saveEdits(planId);
    if (!saved) return;
    flash(`Saved as version ${saved.version}: approve it when ready.`, "ok");
    await load();
  });
});

const load = follow(read, $("#plan-body"), "This plan does not exist, or it is not yours.");
