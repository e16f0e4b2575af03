"""The repository `switchyard up` offers the coding agent with no key: a calculator whose
test fails, kept as a bare repository under the data dir (the operator's local repos)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

DEMO_TASK = "Fix the failing test in the calculator"
FILES = {
    "calculator.py": ('"""A tiny calculator."""\n\n\ndef add(a, b):\n    return a - b\n\n\n'
                      'def multiply(a, b):\n    return a * b\n'),
    "test_calculator.py": ("from calculator import add, multiply\n\n\ndef test_add():\n"
                           "    assert add(2, 3) == 5\n\n\ndef test_multiply():\n"
                           "    assert multiply(2, 3) == 6\n"),
    "README.md": "# calculator\n\n`python3 -m pytest -q` runs the tests.\n",
}
IDENTITY = ["-c", "user.name=Switchyard", "-c", "user.email=demo@switchyard.local"]


def ensure_demo_repo(repos: Path) -> Path:
    """repos/calculator.git, made once (a bare repository: pushes land in it)."""
    bare = repos / "calculator.git"
    if (bare / "HEAD").exists():
        return bare
    repos.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, text in FILES.items():
            (work / name).write_text(text)
        git = ["git", "-C", str(work), *IDENTITY]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "A calculator"], check=True)
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare
