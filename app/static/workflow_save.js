/* Save a workflow from the project page: a name and its steps as JSON (the API's spec), so a
   workflow can be made and run from the UI alone. A refused spec lists every problem the API
   named (a cycle, an unknown job type, a template reading a step that is not upstream…). */
import { api, h, $, busy, flash } from "./ui.js";
import { loadWorkflows } from "./workflows_panel.js";

const enc = encodeURIComponent($("#project").dataset.projectId);

// A first workflow to start from: two canaries side by side, then a gated one fed by the
// first, whose condition reads a step's output (runs as is, with inputs {}).
const EXAMPLE = [
  { name: "build", job_type: "system.canary", payload: { steps: 2, step_seconds: 0.5 } },
  { name: "test", job_type: "system.canary", payload: { steps: 3, step_seconds: 0.5 } },
  { name: "ship", job_type: "system.canary", depends_on: ["build", "test"], requires_approval: true,
    payload: { steps: "{{steps.build.output.steps}}" }, condition: "steps.test.output.steps >= 3" },
];

function saveForm() {
  const name = h("input", { id: "wf-name", name: "name", required: true, maxlength: 200, value: "demo pipeline" });
  const steps = h("textarea", { id: "wf-steps", name: "steps", rows: 10, class: "mono", spellcheck: "false" },
    JSON.stringify(EXAMPLE, null, 2));
  const problems = h("ul", { class: "error", role: "alert", hidden: true });
  const form = h("form", { id: "workflow-save", class: "stack" },
    h("label", { for: "wf-name" }, "Name"), name,
    h("label", { for: "wf-steps" }, "Steps ", h("span", { class: "muted" },
      "(JSON list: name, job_type, payload, depends_on, condition, on_failure, requires_approval)")),
    steps, problems,
    h("button", { type: "submit", class: "primary" }, "Save a version"));
  const show = (lines) => {
    problems.replaceChildren(...lines.map((line) => h("li", {}, line)));
    problems.hidden = false;
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    problems.hidden = true;
    let parsed;
    try {
      parsed = JSON.parse(steps.value);
    } catch (e) {
      show([`The steps are not valid JSON: ${e.message}`]);
      return;
    }
    busy(form.querySelector("button[type=submit]"), async () => {
      try {
        const saved = await api("POST", `/api/projects/${enc}/workflows`, { name: name.value, steps: parsed });
        flash(`Workflow ${saved.name} saved as version ${saved.version}.`, "ok");
        await loadWorkflows();
      } catch (e) {
        show(e.details?.problems?.length ? e.details.problems : [e.message]);
      }
    });
  });
  return h("details", { class: "wf-save" }, h("summary", {}, "New workflow or version"), form);
}

$("#workflow-new").replaceChildren(saveForm());
