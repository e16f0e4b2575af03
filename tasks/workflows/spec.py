"""A workflow definition: its models, every problem with it, and its steps' order.

The models check shape and types (strictly, as every request body here); `problems` checks
meaning and lists every problem at once, each naming its step and field, for one 422.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tasks.workflows import conditions, graph, templates
from tasks.workflows.templates import Path, TemplateError

MAX_STEPS = 100
MAX_PAYLOAD_BYTES = 64 * 1024  # one step's payload as compact UTF-8 JSON
MAX_NAME_LENGTH = 200  # the workflow's own name: a label for people
STEP_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")

# A job type's name -> why a workflow may not use it (unknown, internal), or None.
JobTypeCheck = Callable[[str], str | None]
# Why a job type refuses a payload as it stands (None: it takes it): asked only of a step's
# payload that holds no template, the rest being known at run time alone.
PayloadCheck = Callable[[str, dict[str, Any]], str | None]


class StepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    job_type: str
    payload: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    condition: str | None = None  # false: the step is skipped, and its output reads as null
    on_failure: Literal["stop", "continue"] = "stop"
    requires_approval: bool = False


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    steps: list[StepSpec]


def problems(spec: WorkflowSpec, job_type_ok: JobTypeCheck,
             payload_ok: PayloadCheck | None = None) -> list[str]:
    """Every problem with `spec`; an empty list means it may be stored and run.

    Past MAX_STEPS only the count is reported: a list of thousands of problems helps nobody.
    """
    found = _workflow_problems(spec)
    if len(spec.steps) > MAX_STEPS:
        return found
    ups = upstream(spec)
    for index, step in enumerate(spec.steps):
        found += [f"{_label(index, step)}: {problem}"
                  for problem in _step_problems(step, job_type_ok, ups, payload_ok)]
    found += _duplicate_problems(spec)
    found += [f"step {loop[0]!r}: depends_on: cycle {' → '.join(loop)} "
              "(each step depends on the next)" for loop in graph.cycles(_graph(spec))]
    return found


def order(spec: WorkflowSpec) -> list[list[str]]:
    """Step names in layers: a layer's steps depend only on earlier layers'."""
    return graph.layers(_graph(spec))


def upstream(spec: WorkflowSpec) -> dict[str, set[str]]:
    """Each step's transitive dependencies: the steps whose outputs it may read."""
    return graph.closure(_graph(spec))


def _graph(spec: WorkflowSpec) -> dict[str, list[str]]:
    deps: dict[str, list[str]] = {}
    for step in spec.steps:
        deps.setdefault(step.name, list(step.depends_on))  # a duplicate is reported, not used
    return deps


def _workflow_problems(spec: WorkflowSpec) -> list[str]:
    found = []
    if not spec.name.strip() or len(spec.name) > MAX_NAME_LENGTH or "\x00" in spec.name:
        found.append(f"name: 1 to {MAX_NAME_LENGTH} characters, not blank, no NUL")
    if not spec.steps:
        found.append("steps: a workflow needs at least one step")
    if len(spec.steps) > MAX_STEPS:
        found.append(f"steps: at most {MAX_STEPS} steps, not {len(spec.steps)}")
    return found


def _label(index: int, step: StepSpec) -> str:
    if STEP_NAME.fullmatch(step.name):
        return f"step {step.name!r}"
    return f"step #{index + 1}"


def _step_problems(step: StepSpec, job_type_ok: JobTypeCheck, ups: dict[str, set[str]],
                   payload_ok: PayloadCheck | None = None) -> list[str]:
    found = []
    if not STEP_NAME.fullmatch(step.name):
        found.append(f"name: {_short(step.name)!r} must be a lowercase letter, then up to 63 "
                     "lowercase letters, digits, _ or -")
    if (why := job_type_ok(step.job_type)) is not None:
        found.append(f"job_type: {why}")
    else:
        found += _literal_payload_problems(step, payload_ok)
    for dep in dict.fromkeys(step.depends_on):
        if dep not in ups:
            found.append(f"depends_on: no step is named {_short(dep)!r}")
        if step.depends_on.count(dep) > 1:
            found.append(f"depends_on: {_short(dep)!r} is listed more than once")
    found += _payload_problems(step, ups)
    if step.condition is not None:
        found += _condition_problems(step, ups)
    return found


def _payload_problems(step: StepSpec, ups: dict[str, set[str]]) -> list[str]:
    try:
        paths = templates.references(step.payload)  # first: it bounds the nesting depth
        size = len(json.dumps(step.payload, separators=(",", ":"), ensure_ascii=False)
                   .encode("utf-8", "surrogatepass"))
    except TemplateError as exc:
        return [f"payload: {exc}"]
    except (TypeError, ValueError) as exc:  # built in Python with something JSON cannot hold
        return [f"payload: not JSON: {exc}"]
    found = _reference_problems("payload", step.name, paths, ups)
    if size > MAX_PAYLOAD_BYTES:
        found.append(f"payload: {size} bytes of JSON, over the cap of {MAX_PAYLOAD_BYTES}")
    if _has_nul(step.payload):
        found.append("payload: no string may contain the NUL character (\\u0000)")
    return found


def _literal_payload_problems(step: StepSpec, payload_ok: PayloadCheck | None) -> list[str]:
    """A payload with no template runs as it is: what its job type refuses is refused now,
    not at every run (where it fails the step)."""
    if payload_ok is None:
        return []
    try:
        if templates.references(step.payload):
            return []
    except TemplateError:
        return []  # _payload_problems says why
    why = payload_ok(step.job_type, step.payload)
    return [] if why is None else [f"payload: {why}"]


def _condition_problems(step: StepSpec, ups: dict[str, set[str]]) -> list[str]:
    text = step.condition or ""
    if "\x00" in text:
        return ["condition: must not contain the NUL character (\\u0000)"]
    try:
        expr = conditions.parse(text)
    except conditions.ConditionError as exc:
        return [f"condition: {exc}"]
    return _reference_problems("condition", step.name, conditions.references(expr), ups)


def _reference_problems(field: str, name: str, paths: set[Path],
                        ups: dict[str, set[str]]) -> list[str]:
    found = []
    for path in sorted(paths):
        if path[0] != "steps":
            continue  # inputs are the run's, whatever it is given
        target, shown = path[1], _short(".".join(path))
        if target == name:
            found.append(f"{field}: {shown} is this step's own result")
        elif target not in ups:
            found.append(f"{field}: {shown} names no step")
        elif target not in ups.get(name, set()):
            found.append(f"{field}: {shown} reads step {target!r}, which is not upstream "
                         "(add it to depends_on, or a step that depends on it)")
    return found


def _duplicate_problems(spec: WorkflowSpec) -> list[str]:
    positions: dict[str, list[int]] = {}
    for index, step in enumerate(spec.steps):
        positions.setdefault(step.name, []).append(index + 1)
    return [f"step {_short(name)!r}: name: used by steps " + ", ".join(f"#{i}" for i in where)
            for name, where in positions.items() if len(where) > 1]


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
