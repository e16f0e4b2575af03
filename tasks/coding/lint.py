"""Lint on edit: a syntax error in a file the model just wrote, told in the same tool result.

Parse only, never run: Python through compile() in-process, JavaScript through
`node --check`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tasks.coding.sandbox import SANDBOX_PATH

NODE_CHECK_TIMEOUT_SECONDS = 10.0
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
NODE_SUFFIXES = frozenset({".js", ".mjs", ".cjs"})


def lint_note(path: Path, rel: str, text: str) -> str:
    """What to append to the tool's result: '' when clean or not a language we check."""
    if path.suffix in PYTHON_SUFFIXES:
        problem = python_syntax_error(text, rel)
    elif path.suffix in NODE_SUFFIXES:
        problem = node_syntax_error(path)
    else:
        return ""
    return f"\n\n{problem} — the file was written; fix it" if problem else ""


def python_syntax_error(source: str, filename: str) -> str:
    """compile() parses and compiles; the code is never imported or executed."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        code = f" in `{exc.text.strip()[:200]}`" if exc.text and exc.text.strip() else ""
        # The worker's Python judges: syntax newer than it is reported too, so say which.
        version = f"Python {sys.version_info.major}.{sys.version_info.minor}"
        return f"syntax error at line {exc.lineno} col {exc.offset}: {exc.msg}{code} ({version})"
    except (ValueError, RecursionError) as exc:  # NUL bytes; absurdly deep nesting
        return f"syntax check failed: {exc}"
    return ""


def node_syntax_error(path: Path) -> str:
    """`node --check` parses without running; '' when node is not installed or too slow."""
    node = shutil.which("node")
    if node is None:
        return ""
    try:
        done = subprocess.run([node, "--check", str(path)], capture_output=True, text=True,
                              timeout=NODE_CHECK_TIMEOUT_SECONDS, env={"PATH": SANDBOX_PATH},
                              cwd="/", check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return "" if done.returncode == 0 else node_message(done.stderr, str(path))


def node_message(stderr: str, path: str) -> str:
    """node's report (`<path>:<line>`, the source line, carets, `SyntaxError: ...`) in brief."""
    lines = stderr.splitlines()
    where = next((ln for ln in lines if ln.startswith(path + ":")), "")
    line = where.rsplit(":", 1)[-1] or "?"
    carets = next((ln for ln in lines if ln.lstrip().startswith("^")), "")
    col = str(len(carets) - len(carets.lstrip()) + 1) if carets else "?"
    message = next((ln.strip() for ln in lines if "Error:" in ln), "") or "a syntax error"
    return f"syntax error at line {line} col {col}: {message}"
