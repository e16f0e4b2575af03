/* The job page's links to the pages built around some job types: a workflow.run job's run page
   (its DAG), and for a step of a run, the run it belongs to. */
import { api, h, $, fill } from "./ui.js";
import { subscribe } from "./bus.js";

const PAGES = {
  "workflow.run": (id) => ({ href: `/workflow-runs/${id}`, text: "Open the workflow run: its graph of steps" }),
};
const PARENT_PAGES = {
  "workflow.run": (id) => ({ href: `/workflow-runs/${id}`, text: "A step of a workflow run: open the run" }),
};
let parentType = null; // a promise of the parent's job type, asked once

async function parentLink(job) {
  if (!job.parent_job_id) return null;
  parentType ||= api("GET", `/api/jobs/${encodeURIComponent(job.parent_job_id)}`)
    .then((p) => p.job_type, () => "");
  return PARENT_PAGES[await parentType]?.(job.parent_job_id) || null;
}

subscribe("job", async ({ job }) => {
  const links = [PAGES[job.job_type]?.(job.id), await parentLink(job)].filter(Boolean);
  const box = $("#j-links");
  box.hidden = !links.length;
  fill(box, links.map((l) => h("a", { href: l.href, class: "page-link" }, l.text)));
});
