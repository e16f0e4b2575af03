"""The file tools behind the contract in `tools`: each takes typed inputs, returns the text
the model reads, and raises ToolError for a failure the model can act on.

Every path goes through `Workspace.resolve`; nothing here follows a path the model named
without it.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tasks.coding.lint import lint_note
from tasks.coding.sandbox import SANDBOX_PATH, RunPolicy, hand_over
from tasks.coding.workspace import ToolError, Workspace

LIST_SKIP = frozenset({".git", "node_modules", "__pycache__", ".venv"})
LIST_MAX_ENTRIES = 400
READ_MAX_LINES = 400
READ_MAX_CHARS = 24_000
LINE_MAX_CHARS = 1_000
SEARCH_MAX_MATCHES = 200
SEARCH_MAX_CHARS = 20_000
SEARCH_TIMEOUT_SECONDS = 30.0
BINARY_SNIFF_BYTES = 8192
EDIT_MAX_BYTES = 8 * 1024 * 1024  # edit_file holds the file in memory, twice


def list_files(ws: Workspace, path: str = ".", depth: int = 2) -> str:
    start = ws.resolve(path)
    if not start.is_dir():
        raise ToolError(f"{path} is not a directory; use read_file for a file")
    entries: list[str] = []
    frontier = [start]
    for _ in range(depth):  # breadth first: a cap keeps the shallow overview
        frontier = _list_level(frontier, entries, ws.real_root)
        if len(entries) > LIST_MAX_ENTRIES:
            break
    if not entries:
        return f"{path}: empty directory"
    text = "\n".join(sorted(entries[:LIST_MAX_ENTRIES]))
    if len(entries) > LIST_MAX_ENTRIES:
        text += (f"\n[listing stopped at {LIST_MAX_ENTRIES} entries; list a subdirectory "
                 "or a smaller depth]")
    return text


def _list_level(directories: list[Path], entries: list[str], root: Path) -> list[Path]:
    """Append the entries of `directories` (up to one past the cap); return the subdirectories."""
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
            # Lexical, not resolved: a symlink is shown as one (@) and never followed.
            shown = Path(child.path).relative_to(root).as_posix()
            if child.is_symlink():
                entries.append(shown + "@")
            elif child.is_dir(follow_symlinks=False):
                entries.append(shown + "/")
                below.append(Path(child.path))
            else:
                entries.append(shown)
    return below


def read_file(ws: Workspace, path: str, start_line: int = 1, end_line: int | None = None) -> str:
    real = _regular_file(ws, path)
    if end_line is not None and end_line < start_line:
        raise ToolError(f"end_line ({end_line}) is before start_line ({start_line})")
    shown: list[str] = []
    size, total, capped = 0, 0, False
    with real.open("rb") as f:
        if b"\x00" in f.read(BINARY_SNIFF_BYTES):
            raise ToolError(f"{path} is a binary file ({real.stat().st_size} bytes); "
                            "read_file shows text only")
        f.seek(0)
        for total, raw in enumerate(_bounded_lines(f), 1):  # only lines asked for are kept
            if capped or total < start_line or (end_line is not None and total > end_line):
                continue
            line = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
            overlong = len(raw) == _LINE_BYTES and not raw.endswith(b"\n")
            if overlong or len(line) > LINE_MAX_CHARS:
                line = line[:LINE_MAX_CHARS] + " [... rest of the line cut]"
            if len(shown) == READ_MAX_LINES or size + len(line) > READ_MAX_CHARS:
                capped = True
                continue
            shown.append(f"{total:6}\t{line}")
            size += len(shown[-1]) + 1
    if total == 0:
        return f"{path} is empty"
    if start_line > total:
        raise ToolError(f"{path} has {total} lines; start_line {start_line} is past the end")
    text = "\n".join(shown)
    if capped:
        last = start_line + len(shown) - 1
        text += (f"\n[lines {start_line}-{last} of {total} shown; read more with "
                 f"start_line={last + 1}]")
    return text


def write_file(ws: Workspace, path: str, content: str, owner: RunPolicy) -> str:
    real = ws.resolve(path)
    existed = real.exists()
    if existed and not real.is_file():
        raise ToolError(f"{path} exists and is not a regular file")
    if existed:
        _single_link(real.stat(), path)
    created = _make_parents(real.parent)
    _write(real, path, content)
    hand_over([*created, real], owner)  # commands run as the sandbox user may change it later
    n = content.count("\n") + (not content.endswith("\n") and content != "")
    note = f"{'overwrote' if existed else 'created'} {path} ({n} line{'' if n == 1 else 's'})"
    return note + lint_note(real, path, content)


def edit_file(ws: Workspace, path: str, old: str, new: str) -> str:
    if old == new:
        raise ToolError("old and new are the same text; nothing to change")
    real = _regular_file(ws, path)
    text = _read_text(real, path)
    where = _occurrences(text, old)
    if not where and "\r\n" in text and "\n" in old:  # the model writes \n, the file has \r\n
        old, new = (s.replace("\r\n", "\n").replace("\n", "\r\n") for s in (old, new))
        where = _occurrences(text, old)
    if len(where) != 1:
        lines = ", ".join(str(text.count("\n", 0, at) + 1) for at in where[:10])
        found = f"{len(where)} matches (at lines {lines})" if where else "0 matches"
        advice = ("Add surrounding lines to make it unique." if where else
                  "Read the file again and copy the text exactly, whitespace included.")
        raise ToolError(f"edit_file needs old to match exactly once in {path}; found {found}. "
                        + advice)
    at = where[0]
    updated = text[:at] + new + text[at + len(old):]
    _write(real, path, updated)  # in place: the file keeps its owner and mode
    first = text.count("\n", 0, at) + 1
    return (f"edited {path} at line {first}:\n" + _excerpt(updated, first, new.count("\n") + 1)
            + lint_note(real, path, updated))


def search(ws: Workspace, pattern: str, path: str = ".") -> str:
    rg = shutil.which("rg")
    if rg is None:
        raise ToolError("search is unavailable: ripgrep (rg) is not installed on the worker; "
                        "use run with grep -rn instead")
    target = ws.rel(ws.resolve(path))
    # `--` ends the options: a pattern starting with - is a pattern. rg does not follow
    # symlinks, so it stays in the workspace.
    argv = [rg, "--no-config", "--line-number", "--with-filename", "--no-heading",
            "--color=never", "--hidden", "--glob=!.git", "--max-columns=300",
            "--max-columns-preview", "--", pattern, *([] if target == "." else [target])]
    matches, complete, errors, code = _run_rg(argv, ws.real_root)
    if code == 2 and not matches:
        raise ToolError(f"search failed: {errors.strip()[:2000]}")
    if not matches:
        return f"no matches for {pattern!r} in {target}"
    text = "\n".join(matches)
    if not complete:
        text += f"\n[only the first {len(matches)} matches shown; narrow the pattern or path]"
    return text


_LINE_BYTES = 4 * LINE_MAX_CHARS  # enough bytes for LINE_MAX_CHARS characters of UTF-8


def _bounded_lines(f: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each at most _LINE_BYTES: a 1 GB line must not land in memory."""
    while piece := f.readline(_LINE_BYTES):
        if len(piece) == _LINE_BYTES and not piece.endswith(b"\n"):
            while (rest := f.readline(_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass  # the rest of an over-long line: read past, never kept
        yield piece


def _regular_file(ws: Workspace, path: str) -> Path:
    """An existing regular file (opening a FIFO the model made would block the worker)."""
    real = ws.resolve(path)
    st = real.stat()
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory; use list_files")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path} is not a regular file")
    _single_link(st, path)
    return real


def _single_link(st: os.stat_result, path: str) -> None:
    """A file with other hard links may be one of the worker's own files, linked in by a
    command: the tools, which run as the worker, neither read nor write it."""
    if st.st_nlink > 1:
        raise ToolError(f"{path} has {st.st_nlink - 1} other hard link(s); the file tools do "
                        "not touch such a file (copy it with run if it is yours)")


def _read_text(real: Path, path: str) -> str:
    size = real.stat().st_size
    if size > EDIT_MAX_BYTES:
        raise ToolError(f"{path} is too large for edit_file ({size} bytes, at most "
                        f"{EDIT_MAX_BYTES}); change it with run")
    data = real.read_bytes()
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolError(f"{path} is a binary file ({len(data)} bytes); edit_file edits text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text (byte {exc.start}); change it with run"
                        ) from None


def _make_parents(directory: Path) -> list[Path]:
    """Create `directory` and its missing parents; return the ones created."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
    return missing


def _write(real: Path, path: str, content: str) -> None:
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"content for {path} cannot be encoded as UTF-8: {exc.reason}"
                        ) from None
    with real.open("wb") as f:
        f.write(data)


def _occurrences(text: str, old: str) -> list[int]:
    """Every start of `old` in `text`, overlapping ones too (each would be ambiguous)."""
    found, at = [], text.find(old)
    while at != -1:
        found.append(at)
        at = text.find(old, at + 1)
    return found


def _excerpt(text: str, first: int, count: int, context: int = 2) -> str:
    lines = text.split("\n")  # numbered as read_file and search number them: by \n
    if lines[-1] == "":
        lines.pop()
    lo = max(1, first - context)
    hi = min(len(lines), first + count - 1 + context, lo + 40)
    return "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(lo, hi + 1))


def _run_rg(argv: list[str], cwd: Path) -> tuple[list[str], bool, str, int]:
    """ripgrep's first matches (read until the cap, then stopped), complete?, stderr, exit."""
    matches: list[str] = []
    size, complete = 0, True
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: a chatty stderr cannot block
        proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, env={"PATH": SANDBOX_PATH})
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(SEARCH_TIMEOUT_SECONDS, expire)
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
            if not complete:
                proc.kill()
            proc.stdout.close()  # type: ignore[union-attr]
            try:  # it has ended, or will at its next write to the closed pipe
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        err.seek(0)
        errors = err.read(8192).decode("utf-8", errors="replace")
    if expired.is_set():
        if not matches:
            raise ToolError(f"search took longer than {SEARCH_TIMEOUT_SECONDS:g}s; narrow the "
                            "path or the pattern")
        complete = False
    return matches, complete, errors, proc.returncode
