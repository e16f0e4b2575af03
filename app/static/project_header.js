/* The project page's head: name, goal, phase, and the Launch button. */
import { api, h, $, fill, time, busy, flash, debounce, short } from "./ui.js";
import { addJob } from "./jobs_table.js";
import { title } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);

export async function loadProject() {
  const p = await api("GET", `/api/projects/${enc}`);
  title(`${p.name} · Switchyard`);
  $("#p-name").textContent = p.name;
  $("#p-goal").textContent = p.goal || "";
  // Launch makes the idea packet: a project past idea moves on through its inbox (a 409).
  const launched = (p.phase || "idea") !== "idea";
  $("#launch").disabled = launched;
  $("#launch").title = launched ? `Launched: the project is in its ${p.phase} phase` : "";
  fill($("#p-meta"), h("span", { class: "badge" }, p.phase || "idea"),
    p.night_shift ? h("span", { class: "badge s-waiting" }, "night shift") : null,
    h("span", { class: "muted" }, "created "), time(p.created_at));
}

export const refreshProject = debounce(() => loadProject().catch(() => {}), 800); // its phase moves

$("#launch").addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
  const r = await api("POST", `/api/projects/${enc}/launch`, {});
  flash(`Launch queued as job ${short(r.job_id)}.`, "ok", { href: `/jobs/${r.job_id}`, text: "Follow it" });
  await addJob(r.job_id);
}));
