"""The coding agent's tools: their schemas for the model and `run_tool`, which carries one out.

The names and inputs are a public contract (recorded sessions replay them): add optional
inputs, never rename or remove one. A tool's own failure comes back as an error result the
model can read and act on; `run_tool` does not raise for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from tasks.coding import file_tools
from tasks.coding.file_tools import READ_MAX_LINES, SEARCH_MAX_MATCHES
from tasks.coding.sandbox import RunPolicy, run_command
from tasks.coding.workspace import ToolError, Workspace


def _tool(name: str, description: str, properties: dict[str, Any],
          required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description,
            "input_schema": {"type": "object", "properties": properties,
                             "required": required, "additionalProperties": False}}


_PATH = {"type": "string", "description": "Relative to the repository root."}
TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool("list_files", "List files and directories (directories end with /), breadth first "
          "up to `depth` levels below `path`. .git, node_modules, __pycache__ and .venv are "
          "not listed.",
          {"path": {**_PATH, "default": "."},
           "depth": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2}}, []),
    _tool("read_file", "Read a text file as numbered lines (`start_line`/`end_line` are "
          f"1-based, inclusive). At most {READ_MAX_LINES} lines come back at once; the result "
          "says how to read more.",
          {"path": _PATH, "start_line": {"type": "integer", "minimum": 1},
           "end_line": {"type": "integer", "minimum": 1}}, ["path"]),
    _tool("write_file", "Create or overwrite a file with `content` (parent directories are "
          "created). Prefer edit_file for changes to an existing file.",
          {"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
    _tool("edit_file", "Replace the text `old` with `new` in a file. `old` must match exactly "
          "once, whitespace included: copy it from read_file (without the line numbers) and "
          "add surrounding lines until it is unique.",
          {"path": _PATH, "old": {"type": "string", "minLength": 1}, "new": {"type": "string"}},
          ["path", "old", "new"]),
    _tool("search", "Search file contents with a regular expression (ripgrep syntax); "
          f"answers path:line:text, at most {SEARCH_MAX_MATCHES} matches.",
          {"pattern": {"type": "string", "minLength": 1}, "path": {**_PATH, "default": "."}},
          ["pattern"]),
    _tool("run", "Run a shell command (bash) in the repository root: tests, builds, git "
          "status/diff. No network; stdout and stderr together, long output cut in the "
          "middle. Nothing it starts outlives it.",
          {"command": {"type": "string", "minLength": 1},
           "timeout_seconds": {"type": "number", "exclusiveMinimum": 0,
                               "description": "At most the operator's limit."}},
          ["command"]),
    _tool("finish", "Stop: the work is done (or cannot be done). `summary` says what changed "
          "and how it was verified, or why it could not be done.",
          {"summary": {"type": "string", "minLength": 1}}, ["summary"]),
]
_SCHEMAS = {s["name"]: s for s in TOOL_SCHEMAS}
_VALIDATORS = {name: Draft202012Validator(s["input_schema"]) for name, s in _SCHEMAS.items()}
READ_ONLY_TOOLS = ["list_files", "read_file", "search", "finish"]


def schemas_for(names: Iterable[str]) -> list[dict[str, Any]]:
    """The schemas of these tools, in this order (an unknown name is a programming error)."""
    return [_SCHEMAS[name] for name in names]


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool
    changed: bool  # the workspace may have changed (write_file, edit_file, run)


Handler = Callable[[Workspace, dict[str, Any], RunPolicy], ToolOutcome]


def run_tool(ws: Workspace, name: str, input: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    """Carry out one tool call; a failure of the tool itself is an error result, not a raise."""
    handler = _HANDLERS.get(name)
    if handler is None:
        return _error(f"unknown tool {name!r}; the tools are: {', '.join(_HANDLERS)}")
    if not isinstance(input, dict):
        return _error(f"{name}: the input must be a JSON object, got {type(input).__name__}")
    problem = best_match(_VALIDATORS[name].iter_errors(input))
    if problem is not None:
        where = ".".join(str(p) for p in problem.absolute_path)
        return _error(f"{name}: invalid input{f' ({where})' if where else ''}: "
                      f"{problem.message}")
    try:
        return handler(ws, input, policy)
    except ToolError as exc:
        return _error(str(exc))
    except OSError as exc:  # the message names the path as the model knows it, not ours
        return _error(f"{name}: {exc.strerror or exc}: {_shown(ws, exc.filename)}")


def _error(message: str) -> ToolOutcome:
    return ToolOutcome(content=message, is_error=True, changed=False)


def _shown(ws: Workspace, filename: object) -> str:
    if not isinstance(filename, str):
        return "?"
    try:
        return ws.rel(Path(filename))
    except ToolError:
        return "?"


def _run(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    timeout = min(float(args.get("timeout_seconds", policy.timeout_seconds)),
                  policy.timeout_seconds)
    result = run_command(ws.real_root, args["command"], replace(policy, timeout_seconds=timeout))
    if result.timed_out:
        status = f"[timed out after {timeout:g}s: the command and all it started were killed]"
    elif result.exit_code is None:
        status = "[killed]"
    else:
        status = f"[exit code {result.exit_code}, {result.seconds:.1f}s]"
    hint = ("\n[the output was cut in the middle; send it to a file and search or read that "
            "file for the rest]") if result.truncated else ""
    # A non-zero exit is an answer the model reads; only a command we killed is an error.
    return ToolOutcome(f"{result.output.rstrip()}\n{status}{hint}".lstrip("\n"),
                       is_error=result.exit_code is None, changed=True)


def _answer(content: str, changed: bool = False) -> ToolOutcome:
    return ToolOutcome(content, is_error=False, changed=changed)


_HANDLERS: dict[str, Handler] = {
    "list_files": lambda ws, a, p: _answer(file_tools.list_files(
        ws, a.get("path", "."), a.get("depth", 2))),
    "read_file": lambda ws, a, p: _answer(file_tools.read_file(
        ws, a["path"], a.get("start_line", 1), a.get("end_line"))),
    "write_file": lambda ws, a, p: _answer(file_tools.write_file(
        ws, a["path"], a["content"], p), changed=True),
    "edit_file": lambda ws, a, p: _answer(file_tools.edit_file(
        ws, a["path"], a["old"], a["new"]), changed=True),
    "search": lambda ws, a, p: _answer(file_tools.search(ws, a["pattern"], a.get("path", "."))),
    "run": _run,
    "finish": lambda ws, a, p: _answer("finished"),
}
