"""A task split into subtasks: the JSON the model writes, validated against a schema, with errors
worded so the model can correct itself."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator, ValidationError

MAX_SUBTASKS = 12
TITLE_CHARS = 200
DESCRIPTION_CHARS = 4000
_NOT_BLANK = r"\S"

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "subtasks": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_SUBTASKS,
            "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1, "maxLength": TITLE_CHARS,
                              "pattern": _NOT_BLANK},
                    "description": {"type": "string", "minLength": 1,
                                    "maxLength": DESCRIPTION_CHARS, "pattern": _NOT_BLANK},
                    "files": {"type": "array",
                              "items": {"type": "string", "minLength": 1, "maxLength": 500}},
                },
                "required": ["title", "description"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["subtasks"],
    "additionalProperties": False,
}
_VALIDATOR = Draft202012Validator(PLAN_SCHEMA)

PLAN_FORMAT = f"""\
Reply with one JSON object and nothing else:
{{"subtasks": [{{"title": "...", "description": "...", "files": ["path/to/file.py"]}}]}}
1 to {MAX_SUBTASKS} subtasks, in the order to do them; a title of at most {TITLE_CHARS} \
characters, a description of at most {DESCRIPTION_CHARS}; "files" (optional) lists the paths \
the subtask will likely touch."""


@dataclass(frozen=True)
class Subtask:
    title: str
    description: str
    files: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"title": self.title, "description": self.description, "files": list(self.files)}


@dataclass(frozen=True)
class Plan:
    subtasks: tuple[Subtask, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"subtasks": [s.as_dict() for s in self.subtasks]}

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """A plan from its JSON form; ValueError, listing what is wrong, unless it is valid."""
        errors = validate(data)
        if errors:
            raise ValueError("; ".join(errors))
        return cls(tuple(Subtask(s["title"], s["description"], tuple(s.get("files", ())))
                         for s in data["subtasks"]))


def parse_plan(text: str) -> tuple[Plan | None, list[str]]:
    """The plan in a model's reply (bare JSON, fenced, or amid prose), or None and the errors,
    each naming its JSON path, worded to be sent back to the model."""
    value, problem = find_json(text)
    if problem:
        return None, [problem]
    errors = validate(value)
    return (None, errors) if errors else (Plan.from_dict(value), [])


def validate(value: Any) -> list[str]:
    """What makes `value` not a plan, one readable line each, in document order."""
    return problems(_VALIDATOR, value, explain)


def problems(validator: Draft202012Validator, value: Any,
             explain: Callable[[ValidationError], str]) -> list[str]:
    """What `validator` finds wrong with a model's JSON answer, one readable line each in
    document order, worded to go back to the model (the coding plan's and the planner's)."""
    found = sorted(validator.iter_errors(value), key=lambda e: (
        [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in e.path], str(e.validator)))
    # A blank string breaks `minLength` and `pattern` both: one complaint is enough.
    return [f"{json_path(e)}: {explain(e)}" for e in found
            if not (e.validator == "pattern" and e.instance == "")]


def fallback_plan(task: str) -> Plan:
    """The plan when the model gives no valid one: the whole task as its only subtask."""
    text = task.strip() or "Complete the task."
    title = text.splitlines()[0].strip()
    if len(title) > TITLE_CHARS:
        title = title[:TITLE_CHARS - 1] + "…"
    description = text if len(text) <= DESCRIPTION_CHARS else \
        text[:DESCRIPTION_CHARS - 40] + "\n[… the task continues; see the task]"
    return Plan((Subtask(title, description),))


_SHAPE = '{"subtasks": [{"title": "...", "description": "...", "files": ["..."]}]}'
_FENCE = re.compile(r"```[\w-]*[ \t]*\n(.*?)```", re.DOTALL)


def find_json(text: str, *, shape: str = _SHAPE, key: str = "subtasks"
              ) -> tuple[Any, str | None]:
    """The JSON value the reply holds: the whole text, else a fenced block, else the first `{`
    holding `key` (else the first valid object; the prose around it ignored). The problem,
    when there is none, shows the model the `shape` it was asked for."""
    try:
        return json.loads(text), None
    except ValueError as error:
        problem = error
    fenced = _FENCE.findall(text)
    for block in fenced:
        try:
            return json.loads(block), None
        except ValueError as error:
            problem = error
    decoder = json.JSONDecoder()
    objects: list[Any] = []
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError as error:
            if not fenced and not objects and match.start() == text.find("{"):
                problem = error  # what broke the first attempt at an object says the most
            continue
        if isinstance(value, dict) and key in value:
            return value, None
        objects.append(value)
    if objects:
        return objects[0], None
    return None, f"$: no valid JSON object in the reply ({problem}); expected {shape}"


def json_path(error: ValidationError) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)


def explain(error: ValidationError) -> str:
    """The error in words, without echoing the (possibly long) offending value."""
    kind, limit, value = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = [name for name in limit if name not in value]
        return f"missing required field {', '.join(map(repr, missing))}"
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(value) - set(allowed))
        return f"unexpected field {', '.join(map(repr, extra))} (allowed: {', '.join(allowed)})"
    if kind == "type":
        return f"must be {'an' if limit[0] in 'aeiou' else 'a'} {limit}, got {_type_name(value)}"
    if kind in ("minLength", "maxLength"):
        bounds = error.schema
        return (f"must be {bounds.get('minLength', 0)} to {bounds.get('maxLength', '∞')} "
                f"characters long, got {len(value)}")
    if kind in ("minItems", "maxItems"):
        bounds = error.schema
        return (f"must have {bounds.get('minItems', 0)} to {bounds.get('maxItems', '∞')} "
                f"items, got {len(value)}")
    if kind == "pattern":
        return "must not be blank"
    return error.message[:300]


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
