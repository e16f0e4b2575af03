/* The Code section's list of the project's code tasks (code.run_task jobs): each task's words,
   its repository, its status as it moves and, once proposed, its branch and pull request. */
import { api, h, $, fill, time, badge, jobLink, empty, debounce } from "./ui.js";
import { subscribe } from "./bus.js";
import { isKind } from "./job_kinds.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const TYPE = "code.run_task"; // app/routes/code.py
const PAGE = 20;

function item(job) {
  const p = job.payload || {};
  const r = job.result || {};
  return h("li", { dataset: { jobId: job.id, status: job.status } },
    h("div", { class: "meta small" }, jobLink(job.id), badge(job.status), time(job.created_at)),
    h("p", { class: "task" }, p.task || ""),
    h("div", { class: "meta small" },
      p.repo_url ? h("span", { class: "mono muted" }, p.repo_url) : null,
      r.branch ? h("span", {}, h("span", { class: "muted" }, "branch "), h("code", {}, r.branch)) : null,
      /^https?:\/\//.test(r.pr_url || "") ? h("a", { href: r.pr_url, rel: "noopener noreferrer", class: "pr" }, "Pull request") : null));
}

async function load() {
  const { items } = await api("GET", `/api/projects/${enc}/jobs?job_type=${TYPE}&limit=${PAGE}`);
  fill($("#code-tasks"), items.length ? h("ul", { class: "code-tasks" }, items.map(item))
    : empty("No code task yet. Give the coding agent a repository and a task."));
}

const reload = debounce(panel("code", load), 500);
subscribe("job", ({ job }) => { if (isKind(job.job_type, TYPE)) reload(); });
