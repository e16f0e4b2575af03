/* The project page's approvals: what its agents propose, waiting for a person's decision, and the
   recent decisions below. An approved action's execution job goes into the jobs table. */
import { api, h, $, fill, time, badge, jobLink, pretty, empty, busy, flash, fail, debounce, short } from "./ui.js";
import { addJob } from "./jobs_table.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const approvalsBox = $("#approvals");
const RECENT_DECISIONS = 8;

function approvalCard(a) {
  const pending = a.status === "pending";
  return h("article", { class: `approval ${a.status}`, dataset: { id: a.id, status: a.status } },
    h("h3", {}, a.title || a.action_type),
    h("p", { class: "meta" }, h("span", { class: "muted" }, "Action "), h("code", { class: "action-type" }, a.action_type),
      " ", badge(a.status),
      a.execution_status && a.execution_status !== "idle" ? [" ", h("span", { class: "muted" }, "execution "),
        badge(a.execution_status)] : null,
      a.execution_job_id ? [" ", jobLink(a.execution_job_id)] : null),
    h("details", { open: pending },
      h("summary", {}, "Arguments ", h("span", { class: "muted mono" }, `sha256 ${String(a.args_hash || "").slice(0, 12)}`)),
      pretty(a.action_args)),
    h("p", { class: "meta small" }, "Requested ", time(a.created_at),
      pending && a.expires_at ? [" · expires ", time(a.expires_at)] : null,
      a.decided_at ? [" · decided ", time(a.decided_at)] : null,
      a.source_job_id ? [" · from ", jobLink(a.source_job_id)] : null),
    pending ? h("div", { class: "buttons" },
      h("button", { type: "button", class: "primary approve", onclick: (ev) => decide(ev.currentTarget, a, "approved") }, "Approve"),
      h("button", { type: "button", class: "danger reject", onclick: (ev) => decide(ev.currentTarget, a, "rejected") }, "Reject"))
      : null);
}

function decide(button, a, decision) {
  return busy(button, async () => {
    try {
      const r = await api("POST", `/api/inbox/${encodeURIComponent(a.id)}/decision`, { decision, version: a.version });
      flash(`${decision === "approved" ? "Approved" : "Rejected"}: ${a.title || a.action_type}.`, "ok",
        r.execution_job_id ? { href: `/jobs/${r.execution_job_id}`, text: `execution job ${short(r.execution_job_id)}` } : null);
      if (r.execution_job_id) await addJob(r.execution_job_id);
    } finally {
      await loadApprovals().catch(fail); // a 409 also means: show the approval as it is now
    }
  });
}

async function loadApprovals() {
  const data = await api("GET", `/api/inbox?project_id=${enc}&status=all`);
  const pending = data.items.filter((a) => a.status === "pending");
  const decided = data.items.filter((a) => a.status !== "pending").slice(0, RECENT_DECISIONS);
  $("#approvals-count").textContent = pending.length ? String(pending.length) : "";
  fill(approvalsBox,
    pending.length ? h("div", { class: "approvals pending" }, pending.map(approvalCard))
      : empty("Nothing waiting for you. Actions your agents propose appear here for approval."),
    decided.length ? h("details", { class: "decided" }, h("summary", {}, `Recent decisions (${decided.length})`),
      h("div", { class: "approvals" }, decided.map(approvalCard))) : null);
}
export const refreshApprovals = debounce(panel("overview", loadApprovals), 400);
