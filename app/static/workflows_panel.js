/* The project page's Workflows panel: each saved workflow with its versions; a chosen version's
   steps (drawn, and listed), a form that runs it with JSON inputs, and its recent runs, whose
   statuses follow the project's live stream. */
import { api, h, $, fill, time, badge, empty, busy, flash, fail, debounce, short } from "./ui.js";
import { drawDag } from "./dag.js";
import { versionButtons, pressVersion } from "./version_picker.js";
import { subscribe } from "./bus.js";
import { isKind } from "./job_kinds.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const box = $("#workflows");
const detail = $("#workflow-detail");
let chosen = null; // { latestId, name, version, wid } of the version on show
panel("plans", loadWorkflows);

export async function loadWorkflows() {
  const data = await api("GET", `/api/projects/${enc}/workflows`);
  fill(box, data.items.length ? h("ul", { class: "rows" }, data.items.map(workflowRow))
    : empty("No workflows yet. Save one below to run it."));
}

function workflowRow(w) {
  return h("li", { class: "row workflow", dataset: { name: w.name } },
    // The name opens the newest version (only the small version buttons did)
    h("button", { type: "button", class: "link title", onclick: () => choose(w, w.versions[0]) }, w.name),
    versionButtons(w.name, w.versions, chosen, (v) => choose(w, v)),
    h("span", { class: "muted small" }, "saved ", time(w.updated_at)));
}

async function choose(w, version) {
  const wf = await api("GET", `/api/workflows/${encodeURIComponent(w.latest_id)}?version=${version}`);
  chosen = { latestId: w.latest_id, name: w.name, version, wid: wf.id };
  pressVersion(box, w.name, version);
  const steps = wf.spec.steps;
  detail.hidden = false;
  fill(detail,
    h("h3", {}, wf.name, " ", h("span", { class: "muted" }, `v${wf.version}`)),
    h("div", { class: "dag-box" }, drawDag(steps.map((s) => ({ id: s.name, depends_on: s.depends_on,
      detail: s.job_type })), `Steps of workflow ${wf.name} v${wf.version}`)),
    h("ol", { class: "wf-steps" }, steps.map(stepItem)),
    runForm(wf),
    h("h4", {}, "Recent runs"),
    h("div", { id: "workflow-runs" }, h("p", { class: "muted" }, "Loading…")));
  await loadRuns();
}

function stepItem(s) {
  return h("li", { dataset: { step: s.name } },
    h("strong", { class: "mono" }, s.name), " ", h("code", { class: "type" }, s.job_type),
    s.depends_on.length ? [" ", h("span", { class: "muted" }, "after "), s.depends_on.join(", ")] : null,
    s.requires_approval ? [" ", h("span", { class: "badge s-waiting" }, "needs approval")] : null,
    s.condition ? [" ", h("span", { class: "muted" }, "if "), h("code", {}, s.condition)] : null,
    s.on_failure === "continue" ? [" ", h("span", { class: "muted" }, "(a failure does not stop the run)")] : null);
}

function runForm(wf) {
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const inputs = h("textarea", { id: "wf-inputs", name: "inputs", rows: 3, class: "mono", spellcheck: "false",
    "aria-describedby": "wf-inputs-hint" }, "{}");
  const form = h("form", { id: "workflow-run", class: "stack" },
    h("label", { for: "wf-inputs" }, "Inputs ", h("span", { class: "muted" }, "(JSON object)")),
    inputs,
    h("p", { id: "wf-inputs-hint", class: "muted small" }, "Steps read them as {{inputs.name}}."),
    error,
    h("button", { type: "submit", class: "primary" }, `Run v${wf.version}`));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    error.hidden = true;
    let value;
    try {
      value = inputs.value.trim() ? JSON.parse(inputs.value) : {};
      if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error("it must be a JSON object, like {}");
    } catch (e) {
      error.textContent = `The inputs are not a valid JSON object: ${e.message}`;
      error.hidden = false;
      inputs.focus();
      return;
    }
    busy(form.querySelector("button[type=submit]"), async () => {
      try {
        const r = await api("POST", `/api/workflows/${encodeURIComponent(wf.id)}/runs`, { inputs: value, version: wf.version });
        flash(`Workflow ${wf.name} started: run ${short(r.job_id)}.`, "ok", { href: `/workflow-runs/${r.job_id}`, text: "Open the run" });
        await loadRuns();
      } catch (e) {
        error.textContent = e.message;
        error.hidden = false;
      }
    });
  });
  return form;
}

async function loadRuns() {
  if (!chosen) return;
  const { wid } = chosen;
  const data = await api("GET", `/api/workflows/${encodeURIComponent(wid)}/runs`);
  const target = $("#workflow-runs");
  if (!target || chosen?.wid !== wid) return; // another version was chosen meanwhile
  fill(target, data.items.length ? h("ul", { class: "rows" }, data.items.slice(0, 10).map((r) =>
    h("li", { class: "row wf-run", dataset: { jobId: r.job_id, status: r.status } },
      h("a", { href: `/workflow-runs/${r.job_id}`, class: "mono", title: r.job_id }, short(r.job_id)),
      badge(r.status), time(r.created_at))))
    : empty("Not run yet."));
}

const refreshRuns = debounce(() => loadRuns().catch(fail), 500);
// A run's job changes status as it waits for its steps and ends: its row follows.
subscribe("job", ({ job }) => { if (chosen && isKind(job.job_type, "workflow.run")) refreshRuns(); });
