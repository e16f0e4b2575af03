"""The coding agent's tools: their schemas for the model and `run_tool`, which carries one out.

The names and inputs are a public contract (recorded sessions replay them): add optional
inputs, never rename or remove one. A tool's own failure comes back as an error result the
model can read and act on; `run_tool` does not raise for it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from tasks.coding.sandbox import SANDBOX_PATH, RunPolicy, hand_over, run_command
from tasks.coding.workspace import ToolError, Workspace

LIST_SKIP = frozenset({".git", "node_modules", "__pycache__", ".venv"})
LIST_MAX_ENTRIES = 400
READ_MAX_LINES = 400
READ_MAX_CHARS = 24_000
LINE_MAX_CHARS = 1_000
SEARCH_MAX_MATCHES = 200
SEARCH_MAX_CHARS = 20_000
SEARCH_TIMEOUT_SECONDS = 30.0
NODE_CHECK_TIMEOUT_SECONDS = 10.0
BINARY_SNIFF_BYTES = 8192


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


def _regular_file(ws: Workspace, rel: str) -> Path:
    """A path to an existing regular file (a FIFO would block the worker on open)."""
    path = ws.resolve(rel)
    mode = path.stat().st_mode
    if stat.S_ISDIR(mode):
        raise ToolError(f"{rel} is a directory; use list_files")
    if not stat.S_ISREG(mode):
        raise ToolError(f"{rel} is not a regular file")
    return path


def _read_text(path: Path, rel: str) -> str:
    data = path.read_bytes()
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolError(f"{rel} is a binary file ({len(data)} bytes); only text can be edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{rel} is not UTF-8 text (byte {exc.start}); change it with run"
                        ) from None


# --- the tools ------------------------------------------------------------------------------


def list_files(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    rel = args.get("path", ".")
    start = ws.resolve(rel)
    if not start.is_dir():
        raise ToolError(f"{rel} is not a directory; use read_file for a file")
    entries: list[str] = []
    frontier = [start]
    for _ in range(args.get("depth", 2)):  # breadth first: a cap keeps the shallow overview
        frontier = _list_level(frontier, entries, ws.real_root)
        if len(entries) > LIST_MAX_ENTRIES:
            break
    if not entries:
        return ToolOutcome(f"{rel}: empty directory", is_error=False, changed=False)
    text = "\n".join(sorted(entries[:LIST_MAX_ENTRIES]))
    if len(entries) > LIST_MAX_ENTRIES:
        text += (f"\n[listing stopped at {LIST_MAX_ENTRIES} entries; list a subdirectory "
                 "or a smaller depth]")
    return ToolOutcome(text, is_error=False, changed=False)


def _list_level(directories: list[Path], entries: list[str], root: Path) -> list[Path]:
    """Append the entries of `directories` (up to one past the cap); the subdirectories."""
    below: list[Path] = []
    for directory in directories:
        try:
            children = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for child in children:
            if child.name in LIST_SKIP:
                continue
            if len(entries) > LIST_MAX_ENTRIES:
                return below
            # Lexical, not resolved: a symlink is shown as one (@), never followed.
            shown = Path(child.path).relative_to(root).as_posix()
            if child.is_symlink():
                entries.append(shown + "@")
            elif child.is_dir(follow_symlinks=False):
                entries.append(shown + "/")
                below.append(Path(child.path))
            else:
                entries.append(shown)
    return below


def read_file(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    rel = args["path"]
    path = _regular_file(ws, rel)
    start, end = args.get("start_line", 1), args.get("end_line")
    if end is not None and end < start:
        raise ToolError(f"end_line ({end}) is before start_line ({start})")
    shown: list[str] = []
    size, total, capped = 0, 0, False
    with path.open("rb") as f:
        if b"\x00" in f.read(BINARY_SNIFF_BYTES):
            raise ToolError(f"{rel} is a binary file ({path.stat().st_size} bytes); "
                            "read_file shows text only")
        f.seek(0)
        for total, raw in enumerate(f, 1):  # streamed: only the lines asked for are kept
            if capped or total < start or (end is not None and total > end):
                continue
            line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            if len(line) > LINE_MAX_CHARS:
                line = line[:LINE_MAX_CHARS] + f" [... {len(line) - LINE_MAX_CHARS} chars cut]"
            if len(shown) == READ_MAX_LINES or size + len(line) > READ_MAX_CHARS:
                capped = True
                continue
            shown.append(f"{total:6}\t{line}")
            size += len(shown[-1]) + 1
    if total == 0:
        return ToolOutcome(f"{rel} is empty", is_error=False, changed=False)
    if start > total:
        raise ToolError(f"{rel} has {total} lines; start_line {start} is past the end")
    text = "\n".join(shown)
    last = start + len(shown) - 1
    if capped:
        text += (f"\n[lines {start}-{last} of {total} shown; read more with "
                 f"start_line={last + 1}]")
    return ToolOutcome(text, is_error=False, changed=False)


def write_file(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    rel, content = args["path"], args["content"]
    path = ws.resolve(rel)
    existed = path.exists()
    if existed and not path.is_file():
        raise ToolError(f"{rel} exists and is not a regular file")
    created = _make_parents(path.parent)
    _write(path, rel, content)
    hand_over([*created, path], policy)
    verb = "overwrote" if existed else "created"
    note = f"{verb} {rel} ({len(content.splitlines())} lines)"
    return ToolOutcome(note + lint_note(path, rel, content), is_error=False, changed=True)


def edit_file(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    rel, old, new = args["path"], args["old"], args["new"]
    if old == new:
        raise ToolError("old and new are the same text; nothing to change")
    path = _regular_file(ws, rel)
    text = _read_text(path, rel)
    where = _occurrences(text, old)
    if not where and "\r\n" in text and "\n" in old:  # the model writes \n; the file has \r\n
        old, new = (s.replace("\r\n", "\n").replace("\n", "\r\n") for s in (old, new))
        where = _occurrences(text, old)
    if len(where) != 1:
        lines = ", ".join(str(text.count("\n", 0, at) + 1) for at in where[:10])
        found = f"{len(where)} matches (at lines {lines})" if where else "0 matches"
        raise ToolError(f"edit_file needs old to match exactly once in {rel}; found {found}. "
                        + ("Add surrounding lines to make it unique." if where else
                           "Read the file again and copy the text exactly, whitespace "
                           "included."))
    at = where[0]
    updated = text[:at] + new + text[at + len(old):]
    _write(path, rel, updated)
    first = text.count("\n", 0, at) + 1
    note = f"edited {rel} at line {first}\n" + _excerpt(updated, first, new.count("\n") + 1)
    return ToolOutcome(note + lint_note(path, rel, updated), is_error=False, changed=True)


def search(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    rg = shutil.which("rg")
    if rg is None:
        raise ToolError("search is unavailable: ripgrep (rg) is not installed on the worker; "
                        "use run with grep -rn instead")
    rel = args.get("path", ".")
    target = ws.rel(ws.resolve(rel))
    argv = [rg, "--no-config", "--line-number", "--no-heading", "--color=never", "--hidden",
            "--with-filename", "--glob=!.git", "--max-columns=300", "--max-columns-preview",
            "--", args["pattern"], *([] if target == "." else [target])]
    matches, complete, errors, code = _run_rg(argv, ws.real_root)
    if code == 2 and not matches:
        raise ToolError(f"search failed: {errors.strip()[:2000]}")
    if not matches:
        return ToolOutcome(f"no matches for {args['pattern']!r} in {target}",
                           is_error=False, changed=False)
    text = "\n".join(matches)
    if not complete:
        text += (f"\n[only the first {len(matches)} matches shown; narrow the pattern or "
                 "the path]")
    return ToolOutcome(text, is_error=False, changed=False)


def run(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
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
    return ToolOutcome(f"{result.output.rstrip()}\n{status}{hint}".lstrip("\n"),
                       is_error=result.exit_code is None, changed=True)


def finish(ws: Workspace, args: dict[str, Any], policy: RunPolicy) -> ToolOutcome:
    return ToolOutcome("finished", is_error=False, changed=False)


_HANDLERS: dict[str, Handler] = {"list_files": list_files, "read_file": read_file,
                                 "write_file": write_file, "edit_file": edit_file,
                                 "search": search, "run": run, "finish": finish}


# --- helpers --------------------------------------------------------------------------------


def _make_parents(directory: Path) -> list[Path]:
    """Create `directory` and its missing parents; the ones created, outermost first."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
    return list(reversed(missing))


def _write(path: Path, rel: str, content: str) -> None:
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"content for {rel} cannot be encoded as UTF-8: {exc.reason}") from None
    # In place, not a rename: the file keeps its owner and mode (the sandbox user's, +x).
    with path.open("wb") as f:
        f.write(data)


def _occurrences(text: str, old: str) -> list[int]:
    """Every start of `old` in `text`, overlapping ones too (each would be ambiguous)."""
    found, at = [], text.find(old)
    while at != -1:
        found.append(at)
        at = text.find(old, at + 1)
    return found


def _excerpt(text: str, first: int, count: int, context: int = 2) -> str:
    lines = text.split("\n")
    lo, hi = max(1, first - context), min(len(lines), first + count - 1 + context)
    hi = min(hi, lo + 40)
    return "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(lo, hi + 1))


def _run_rg(argv: list[str], cwd: Path) -> tuple[list[str], bool, str, int]:
    """ripgrep's first matches (stopped once enough), complete?, its stderr, exit code."""
    matches: list[str] = []
    size, complete = 0, True
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, env={"PATH": SANDBOX_PATH})
        timer = threading.Timer(SEARCH_TIMEOUT_SECONDS, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                if len(matches) == SEARCH_MAX_MATCHES or size + len(line) > SEARCH_MAX_CHARS:
                    complete = False
                    break
                matches.append(line)
                size += len(line) + 1
        finally:
            timer.cancel()
            proc.kill()
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
        err.seek(0)
        errors = err.read(8192).decode("utf-8", errors="replace")
    return matches, complete, errors, proc.returncode


# --- lint on edit ---------------------------------------------------------------------------


def lint_note(path: Path, rel: str, text: str) -> str:
    """A syntax error in what was just written, said so the model fixes it next ('' if none)."""
    if path.suffix in {".py", ".pyi"}:
        problem = python_syntax_error(text, rel)
    elif path.suffix in {".js", ".mjs", ".cjs"}:
        problem = node_syntax_error(path)
    else:
        return ""
    return f"\n\n{problem} — the file was written; fix it" if problem else ""


def python_syntax_error(source: str, filename: str) -> str:
    """compile() only parses and compiles: the code is never imported or run."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        code = f" in `{exc.text.strip()[:200]}`" if exc.text and exc.text.strip() else ""
        # The worker's Python judges: syntax newer than it would be flagged too.
        version = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        return f"syntax error at line {exc.lineno} col {exc.offset}: {exc.msg}{code} ({version})"
    except (ValueError, RecursionError) as exc:  # NUL bytes; absurd nesting
        return f"syntax check failed: {exc}"
    return ""


def node_syntax_error(path: Path) -> str:
    """`node --check` parses without running; skipped (no note) when node is not there."""
    node = shutil.which("node")
    if node is None:
        return ""
    try:
        done = subprocess.run([node, "--check", str(path)], capture_output=True, text=True,
                              timeout=NODE_CHECK_TIMEOUT_SECONDS, env={"PATH": SANDBOX_PATH},
                              cwd="/", check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if done.returncode == 0:
        return ""
    return _node_message(done.stderr, str(path))


def _node_message(stderr: str, path: str) -> str:
    """node's report (`<path>:<line>`, the source line, carets, `SyntaxError: ...`) in brief."""
    lines = stderr.splitlines()
    where = next((ln for ln in lines if ln.startswith(path + ":")), "")
    line = where.rsplit(":", 1)[-1]
    carets = next((ln for ln in lines if ln.lstrip().startswith("^")), "")
    col = len(carets) - len(carets.lstrip()) + 1 if carets else "?"
    message = next((ln for ln in lines if "Error:" in ln), "").strip() or "a syntax error"
    return f"syntax error at line {line or '?'} col {col}: {message}"
