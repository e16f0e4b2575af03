"""Templates in workflow payloads: `{{inputs.x}}` and `{{steps.a.output.b.0}}`, found and filled.

A string that is exactly one template takes the value it names, JSON type and all; a template
inside longer text is interpolated (a string as itself, anything else as compact JSON).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tasks.workflows.errors import WorkflowError

Path = tuple[str, ...]

# What a step whose condition was false leaves behind: its output reads as null downstream.
SKIPPED = "skipped"
MAX_DEPTH = 64  # nesting of a payload walked here: bounds recursion whatever the input
OPEN, CLOSE, ESCAPED_OPEN = "{{", "}}", "\\{{"
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_MAX_INDEX_DIGITS = 9  # int() of a longer digit string could be refused (or be any list's end)


class TemplateError(WorkflowError):
    """A template is malformed, or the value it names is missing from the context."""


def parse_path(text: str) -> Path:
    """`steps.a.output.items.0` -> ("steps", "a", "output", "items", "0"), its shape checked."""
    body = text.strip()
    parts = tuple(body.split("."))
    for part in parts:
        if not _SEGMENT.fullmatch(part):
            raise TemplateError(f"{{{{{_short(body)}}}}}: a path is dot-separated names or "
                                "indexes of letters, digits, _ and -")
    check_path(parts)
    return parts


def check_path(parts: Path) -> None:
    """Paths start at `inputs`, or at `steps.<name>.output` / `steps.<name>.status`."""
    shown = _short(".".join(parts))
    if not parts:
        raise TemplateError("an empty path names nothing")
    if parts[0] == "inputs":
        return
    if parts[0] != "steps":
        raise TemplateError(f"{{{{{shown}}}}}: a path starts with inputs or steps")
    if len(parts) < 3 or parts[2] not in ("output", "status"):
        raise TemplateError(f"{{{{{shown}}}}}: write steps.<name>.output… or steps.<name>.status")
    if parts[2] == "status" and len(parts) > 3:
        raise TemplateError(f"{{{{{shown}}}}}: a step's status is a string, with no fields")


def references(value: Any) -> set[Path]:
    """Every template path in a payload (keys are never templates)."""
    found: set[Path] = set()
    _collect(value, found, 0)
    return found


def _collect(value: Any, found: set[Path], depth: int) -> None:
    _check_depth(depth)
    if isinstance(value, str):
        found.update(p for p in _pieces(value) if isinstance(p, tuple))
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _collect(item, found, depth + 1)


def render(value: Any, context: dict[str, Any]) -> Any:
    """The payload with each template filled from `context`; the input is left unchanged.

    context = {"inputs": {...}, "steps": {name: {"output": ..., "status": ...}}}. A skipped
    step's output reads as null, however deep the path into it. Values taken whole are shared
    with the context, not copied.
    """
    return _render(value, context, 0)


def _render(value: Any, context: Any, depth: int) -> Any:
    _check_depth(depth)
    if isinstance(value, str):
        return _render_text(value, context)
    if isinstance(value, dict):
        return {key: _render(item, context, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_render(item, context, depth + 1) for item in value]
    return value


def _render_text(text: str, context: Any) -> Any:
    pieces = _pieces(text)
    if len(pieces) == 1 and isinstance(pieces[0], tuple):
        return resolve(pieces[0], context)  # a whole-value template keeps its JSON type
    return "".join(p if isinstance(p, str) else _as_text(resolve(p, context)) for p in pieces)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TemplateError(f"a value in the context is not JSON: {exc}") from None


def _pieces(text: str) -> list[str | Path]:
    """Literal text and template paths in order; `\\{{` is a literal `{{`."""
    pieces: list[str | Path] = []
    literal: list[str] = []
    at = 0
    while (start := text.find(OPEN, at)) >= 0:
        if start > 0 and text[start - 1] == "\\":
            literal.append(text[at:start - 1] + OPEN)
            at = start + len(OPEN)
            continue
        end = text.find(CLOSE, start + len(OPEN))
        if end < 0:
            raise TemplateError(f"unclosed {{{{ at character {start + 1} of "
                                f"{_short(text)!r} (write \\{{{{ for a literal {{{{)")
        literal.append(text[at:start])
        if "".join(literal):
            pieces.append("".join(literal))
        literal = []
        pieces.append(parse_path(text[start + len(OPEN):end]))
        at = end + len(CLOSE)
    literal.append(text[at:])
    if "".join(literal) or not pieces:
        pieces.append("".join(literal))
    return pieces


def resolve(path: Path, context: Any) -> Any:
    """The value `path` names in `context`; TemplateError names the path if it is missing."""
    check_path(path)
    if not isinstance(context, dict):
        raise TemplateError(f"{_dotted(path)} is missing: the context is not an object")
    if path[0] == "inputs":
        return _walk(context.get("inputs"), path, 1)
    steps = context.get("steps")
    entry = steps.get(path[1]) if isinstance(steps, dict) else None
    if not isinstance(entry, dict):
        raise TemplateError(f"{_dotted(path)} is missing: step {_short(path[1])} has no result")
    if path[2] == "status":
        return entry.get("status")
    if entry.get("status") == SKIPPED:
        return None
    return _walk(entry.get("output"), path, 3)


def _walk(value: Any, path: Path, start: int) -> Any:
    for i in range(start, len(path)):
        key, parent = path[i], _dotted(path[:i])
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, dict):
            raise TemplateError(f"{_dotted(path)} is missing: {parent} has no key {_short(key)!r}")
        elif isinstance(value, list):
            if not (key.isascii() and key.isdigit()):
                raise TemplateError(f"{_dotted(path)} is missing: {parent} is a list; "
                                    f"{_short(key)!r} is no index")
            if len(key) > _MAX_INDEX_DIGITS or int(key) >= len(value):
                raise TemplateError(f"{_dotted(path)} is missing: {parent} has "
                                    f"{len(value)} item(s), no index {_short(key)}")
            value = value[int(key)]
        else:
            raise TemplateError(f"{_dotted(path)} is missing: {parent} is {kind(value)}, "
                                "with no fields")
    return value


def kind(value: Any) -> str:
    """A JSON value's type in words, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__} (not JSON)"


def _check_depth(depth: int) -> None:
    if depth > MAX_DEPTH:
        raise TemplateError(f"the payload is nested more than {MAX_DEPTH} levels deep")


def _dotted(path: Path) -> str:
    return _short(".".join(path))


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
