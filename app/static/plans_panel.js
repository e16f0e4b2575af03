/* The project page's Plans panel: a goal handed to the planner (it writes a plan of tasks, which
   waits for approval unless told not to), and the project's plans with their live statuses. */
import { api, h, $, fill, time, badge, empty, busy, flash, fail, debounce, fields } from "./ui.js";
import { subscribe } from "./bus.js";
import { isKind } from "./job_kinds.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const box = $("#plans");
const form = $("#plan-form");
const error = $("#plan-form-error");

async function loadPlans() {
  const data = await api("GET", `/api/projects/${enc}/plans`);
  fill(box, data.items.length ? h("ul", { class: "rows" }, data.items.map((p) =>
    h("li", { class: "row plan", dataset: { planId: p.id, status: p.status } },
      h("a", { class: "title", href: `/plans/${p.id}` }, p.name), badge(p.status),
      p.version ? h("span", { class: "muted" }, `v${p.version}`) : null,
      h("span", { class: "muted small clamp" }, p.goal), time(p.created_at))))
    : empty("No plan yet. Give the planner a goal below."));
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  error.hidden = true;
  const f = fields(form);
  const body = { name: (f.name || "").trim(), goal: (f.goal || "").trim(), auto_approve: form.elements.auto_approve.checked };
  if (f.repo_url?.trim()) body.repo_url = f.repo_url.trim();
  busy(form.querySelector("button[type=submit]"), async () => {
    try {
      const r = await api("POST", `/api/projects/${enc}/plans`, body);
      flash(`The planner is writing “${body.name}”.`, "ok", { href: `/plans/${r.plan_id}`, text: "Open the plan" });
      form.reset();
      await loadPlans();
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
    }
  });
});

const refresh = debounce(panel("plans", loadPlans), 600);
// A plan's status moves with its jobs' (plan.generate, its tasks' agent.task): those are the cue.
subscribe("job", ({ job }) => { if (isKind(job.job_type, "plan.", "agent.")) refresh(); });
