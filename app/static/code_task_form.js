/* The project page's "Code task" form: a repository and a task for the coding agent, posted to
   /api/projects/<pid>/code-tasks. A 422 shows next to each field it names; the new job is linked
   and goes into the jobs table. */
import { api, h, $, fill, busy, flash, short } from "./ui.js";
import { addJob } from "./jobs_table.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const form = $("#code-task");
const FIELDS = { repo_url: "ct-repo", task: "ct-task", branch: "ct-branch", github_repo: "ct-github",
  max_iterations: "ct-iterations" };
// The API names the regular expression a field missed; a person reads what to write instead.
const HINTS = { "ct-github": "Write it as owner/name, like octo/widgets." };
const general = $("#code-task-error");
const done = $("#code-task-done");

function clearErrors() {
  general.hidden = true;
  for (const id of Object.values(FIELDS)) {
    $(`#${id}`).removeAttribute("aria-invalid");
    $(`#${id}-error`).hidden = true;
  }
}

/** The API's message, and each field it names (`fields`, keyed by the payload's own names). */
function showErrors(e) {
  general.textContent = e.message;
  general.hidden = false;
  let first = null;
  for (const [key, message] of Object.entries(e.details?.fields || {})) {
    const id = FIELDS[key.replace(/^(body|payload)\./, "")];
    if (!id) continue;
    const input = $(`#${id}`);
    input.setAttribute("aria-invalid", "true");
    const note = $(`#${id}-error`);
    note.textContent = HINTS[id] && /pattern/.test(message) ? HINTS[id] : message;
    note.hidden = false;
    first = first || input;
  }
  if (first) first.focus();
}

function submit(body) {
  return api("POST", `/api/projects/${enc}/code-tasks`, body);
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const f = form.elements;
  clearErrors();
  done.hidden = true;
  const body = { repo_url: f.repo_url.value.trim(), task: f.task.value.trim() };
  for (const k of ["branch", "github_repo"]) if (f[k].value.trim()) body[k] = f[k].value.trim();
  if (f.max_iterations.value !== "") body.max_iterations = Number(f.max_iterations.value);
  busy(form.querySelector("button[type=submit]"), async () => {
    let r;
    try {
      r = await submit(body);
    } catch (e) {
      showErrors(e);
      return;
    }
    const href = `/jobs/${encodeURIComponent(r.job_id)}`;
    fill(done, `Code task queued as job ${short(r.job_id)}. `, h("a", { href, class: "job-link" }, "Follow it"));
    done.hidden = false;
    flash(`Code task queued as job ${short(r.job_id)}.`, "ok", { href, text: "Open" });
    await addJob(r.job_id);
  });
});
