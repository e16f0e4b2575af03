"""A plan's tasks: the JSON Schema the model's answer (or a person's edit) must meet, and the
DAG rules no schema can say (unique ids, known dependencies, no cycles). Every problem is
worded to be sent back to the model, or answered in one 422."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

# The shared wording of JSON Schema errors and the lenient JSON finder of the coding agent's
# plans: the same answers from the same kind of model deserve the same complaints.
from tasks.coding.plans import explain, find_json, problems
from tasks.workflows import graph

MAX_TASKS = 30
DESCRIPTION_CHARS = 4000
# A task id becomes a DAG node's name: the workflow step-name rule.
TASK_ID = r"^[a-z][a-z0-9_-]{0,63}$"
ROLE = r"^[a-z][a-z0-9_-]{0,39}$"
_NOT_BLANK = r"\S"

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": TASK_ID},
        "description": {"type": "string", "minLength": 1, "maxLength": DESCRIPTION_CHARS,
                        "pattern": _NOT_BLANK},
        "assigned_to": {"type": "string", "pattern": ROLE},
        "depends_on": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TASKS},
    },
    "required": ["id", "description", "assigned_to", "depends_on"],
    "additionalProperties": False,
}
PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"tasks": {"type": "array", "minItems": 1, "maxItems": MAX_TASKS,
                             "items": TASK_SCHEMA}},
    "required": ["tasks"],
    "additionalProperties": False,
}
_VALIDATOR = Draft202012Validator(PLAN_SCHEMA)
SHAPE = ('{"tasks": [{"id": "research", "description": "...", "assigned_to": "researcher", '
         '"depends_on": []}]}')


@dataclass(frozen=True)
class Task:
    id: str
    description: str
    assigned_to: str
    depends_on: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "description": self.description,
                "assigned_to": self.assigned_to, "depends_on": list(self.depends_on)}


def parse_answer(text: str, *, kept: Collection[str] = ()) -> tuple[list[Task], list[str]]:
    """The tasks in a model's reply, or [] and every problem. `kept`: ids of tasks already
    completed (a revision may depend on them, and must not reuse their ids)."""
    value, problem = find_json(text, shape=SHAPE, key="tasks")
    if problem:
        return [], [problem]
    return check(value, kept=kept)


def check(value: Any, *, kept: Collection[str] = ()) -> tuple[list[Task], list[str]]:
    """`value` as tasks if it meets the schema and the DAG rules, else [] and its problems:
    the DAG's too when the schema's are elsewhere, so one answer gets every complaint."""
    errors = schema_problems(value)
    tasks = _shaped(value)
    if tasks is not None:
        errors += dag_problems(tasks, kept=kept)
    return ([], errors) if errors else (tasks or [], [])


def _shaped(value: Any) -> list[Task] | None:
    """The tasks, if their ids and dependencies have the shape the DAG rules read."""
    items = value.get("tasks") if isinstance(value, dict) else None
    if not isinstance(items, list) or not all(
            isinstance(t, dict) and isinstance(t.get("id"), str)
            and isinstance(t.get("depends_on", []), list)
            and all(isinstance(d, str) for d in t.get("depends_on", [])) for t in items):
        return None
    return [Task(t["id"], str(t.get("description", "")), str(t.get("assigned_to", "")),
                 tuple(t.get("depends_on", []))) for t in items]


def schema_problems(value: Any) -> list[str]:
    return problems(_VALIDATOR, value, _explain_task)


def dag_problems(tasks: list[Task], *, kept: Collection[str] = ()) -> list[str]:
    """Duplicate ids, dependencies on no task, on itself or listed twice, and cycles."""
    found: list[str] = []
    seen: dict[str, int] = {}
    for index, task in enumerate(tasks):
        where = f"$.tasks[{index}]"
        if task.id in kept:
            found.append(f"{where}.id: {task.id!r} is a completed task's id; "
                         "give the new task another id")
        if task.id in seen:
            found.append(f"{where}.id: {task.id!r} is also the id of $.tasks[{seen[task.id]}]")
        seen.setdefault(task.id, index)
    known = set(seen) | set(kept)
    for index, task in enumerate(tasks):
        where = f"$.tasks[{index}].depends_on"
        for dep in dict.fromkeys(task.depends_on):
            if dep == task.id:
                found.append(f"{where}: task {task.id!r} depends on itself")
            elif dep not in known:
                found.append(f"{where}: no task has the id {dep!r}")
            if task.depends_on.count(dep) > 1:
                found.append(f"{where}: {dep!r} is listed more than once")
    deps = {t.id: [d for d in t.depends_on if d != t.id] for t in tasks}
    found += [f"$.tasks: cycle {' → '.join(loop)} (each task depends on the next)"
              for loop in graph.cycles(deps)]
    return found


def _explain_task(error: ValidationError) -> str:
    if error.validator == "pattern" and error.path and error.path[-1] == "id":
        return (f"{str(error.instance)[:80]!r} is not a task id: a lowercase letter, then up "
                "to 63 lowercase letters, digits, _ or -")
    if error.validator == "pattern" and error.path and error.path[-1] == "assigned_to":
        return (f"{str(error.instance)[:80]!r} is not a role: a lowercase letter, then up to "
                "39 lowercase letters, digits, _ or - (e.g. engineer, researcher, qa)")
    return explain(error)
