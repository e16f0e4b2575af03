/* A plan's tasks as a form, while the plan awaits approval: each task's id, role, dependencies
   and description, tasks added or removed; saved with PUT /api/plans/<id> as a new version
   (the API checks it and lists every problem at once). */
import { api, h, $, fill } from "./ui.js";

const ROLES = ["engineer", "researcher", "qa", "writer", "analyst"]; // suggestions: any role is taken
const box = $("#plan-edit-tasks");
const problems = $("#plan-edit-problems");
let dirty = false;
let onDirty = () => {};
let shownFor = ""; // the plan version and approval the form shows: a new one replaces the form

export const isDirty = () => dirty;

function setDirty(value) {
  dirty = value;
  onDirty(value);
}

function taskRow(t, n) {
  const id = (field) => `task-${n}-${field}`;
  const row = h("fieldset", { class: "task-edit", dataset: { task: t.id || "" } },
    h("legend", { class: "sr-only" }, `Task ${t.id || "new"}`),
    h("div", { class: "row-fields" },
      h("div", {}, h("label", { for: id("id") }, "Id"),
        h("input", { id: id("id"), name: "id", value: t.id || "", required: true, maxlength: 64, spellcheck: "false",
          autocomplete: "off", class: "mono" })),
      h("div", {}, h("label", { for: id("role") }, "Role"),
        h("input", { id: id("role"), name: "assigned_to", value: t.assigned_to || "", required: true, maxlength: 40,
          list: "plan-roles", spellcheck: "false", autocomplete: "off" })),
      h("div", {}, h("label", { for: id("deps") }, "After ", h("span", { class: "muted" }, "ids, comma-separated")),
        h("input", { id: id("deps"), name: "depends_on", value: (t.depends_on || []).join(", "), spellcheck: "false",
          autocomplete: "off", class: "mono" }))),
    h("label", { for: id("desc") }, "Description"),
    h("textarea", { id: id("desc"), name: "description", rows: 2, required: true, maxlength: 4000 }, t.description || ""),
    h("button", { type: "button", class: "ghost danger remove-task", onclick: () => { row.remove(); setDirty(true); } },
      "Remove this task"));
  return row;
}

/** The form's tasks, as the API takes them. */
export function editedTasks() {
  return [...box.querySelectorAll("fieldset.task-edit")].map((row) => {
    const v = (name) => row.querySelector(`[name=${name}]`).value;
    return { id: v("id").trim(), assigned_to: v("assigned_to").trim(), description: v("description").trim(),
      depends_on: v("depends_on").split(/[\s,]+/).filter(Boolean) };
  });
}

/** Show `plan`'s tasks in the form, unless it already shows them (or holds unsaved edits). */
export function showEditor(plan, dirtyChanged) {
  onDirty = dirtyChanged;
  const key = `${plan.version}:${plan.approval_id}`;
  if (key === shownFor || dirty) return;
  shownFor = key;
  let n = 0;
  fill(box, h("datalist", { id: "plan-roles" }, ROLES.map((r) => h("option", { value: r }))),
    plan.tasks.map((t) => taskRow(t, n++)));
  problems.hidden = true;
  $("#plan-add-task").onclick = () => {
    const row = taskRow({}, n++);
    box.append(row);
    row.querySelector("input").focus();
    setDirty(true);
  };
}

box.addEventListener("input", () => setDirty(true));

/** Save the form as the plan's next version; the API's problems are listed under the form. */
export async function saveEdits(planId) {
  problems.hidden = true;
  try {
    const plan = await api("PUT", `/api/plans/${encodeURIComponent(planId)}`, { tasks: editedTasks() });
    setDirty(false);
    return plan;
  } catch (e) {
    const listed = e.details?.problems || [];
    fill(problems, listed.length ? listed.map((p) => h("li", {}, p)) : h("li", {}, e.message));
    problems.hidden = false;
    return null;
  }
}
