/* The project page's "Submit a job" form: the payload checked as a JSON object here, the rest by
   the API; the new job goes into the table at once. */
import { api, $, busy, flash, short } from "./ui.js";
import { addJob } from "./jobs_table.js";

const enc = encodeURIComponent($("#project").dataset.projectId);

$("#submit-job").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const form = ev.currentTarget;
  const f = form.elements;
  const err = $("#submit-error");
  err.hidden = true;
  let payload;
  try {
    payload = f.payload.value.trim() ? JSON.parse(f.payload.value) : {};
    if (payload === null || typeof payload !== "object" || Array.isArray(payload)) throw new Error("it must be a JSON object, like {}");
  } catch (e) {
    err.textContent = `The payload is not a valid JSON object: ${e.message}`;
    err.hidden = false;
    f.payload.focus();
    return;
  }
  const body = { job_type: f.job_type.value.trim(), payload };
  if (f.priority.value !== "") body.priority = Number(f.priority.value);
  if (f.max_attempts.value !== "") body.max_attempts = Number(f.max_attempts.value);
  if (f.idempotency_key.value.trim()) body.idempotency_key = f.idempotency_key.value.trim();
  busy(form.querySelector("button[type=submit]"), async () => {
    try {
      const r = await api("POST", `/api/projects/${enc}/jobs`, body);
      flash(r.created ? `Job ${short(r.job_id)} queued.` : `Same idempotency key: job ${short(r.job_id)} already exists.`,
        "ok", { href: `/jobs/${r.job_id}`, text: "Open" });
      await addJob(r.job_id);
    } catch (e) {
      err.textContent = e.message;
      err.hidden = false;
    }
  });
});
