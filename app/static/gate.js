/* Approve or reject one approval from a page other than the project's inbox (a workflow run's gated
   step, a plan waiting for its go-ahead). A decision names the version it saw: the inbox's
   optimistic lock, so a decision made meanwhile elsewhere is a 409, never silently overruled. */
import { api, h, busy, flash } from "./ui.js";

/** The project's pending approvals by id (the inbox is where versions come from). */
export async function pendingApprovals(projectId) {
  const data = await api("GET", `/api/inbox?project_id=${encodeURIComponent(projectId)}&status=pending`);
  return new Map(data.items.map((a) => [a.id, a]));
}

/** Approve and Reject buttons for `approval`; `after()` runs once a decision was sent, or refused. */
export function decisionButtons(approval, after) {
  const decide = (button, decision) => busy(button, async () => {
    try {
      await api("POST", `/api/inbox/${encodeURIComponent(approval.id)}/decision`,
        { decision, version: approval.version });
      flash(`${decision === "approved" ? "Approved" : "Rejected"}: ${approval.title || approval.action_type}.`, "ok");
    } finally {
      await after(); // a 409 too: show the approval as it is now
    }
  });
  return h("div", { class: "buttons" },
    h("button", { type: "button", class: "primary approve", onclick: (ev) => decide(ev.currentTarget, "approved") }, "Approve"),
    h("button", { type: "button", class: "danger reject", onclick: (ev) => decide(ev.currentTarget, "rejected") }, "Reject"));
}
