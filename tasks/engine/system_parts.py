"""The programs a job type needs from the machine (not from pip), how to tell whether they
are here, and the command that installs each: one home for what `switchyard doctor` reports
and for the refusal a job meets when its part is missing."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tasks.engine.errors import JobTypeUnavailable

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; Playwright never downloads one
APT = "apt-get install -y"
# The system's programs, without what a virtualenv or a user puts first: the coding agent's
# sandbox runs a repository's commands with this PATH.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Finding:
    ok: bool
    detail: str  # the version found, or what is wrong


@dataclass(frozen=True)
class Part:
    name: str
    label: str
    fix: str
    probe: Callable[[], Finding]


def _version(argv: list[str]) -> Finding:
    """Found when `argv` runs; its first line of output is the detail."""
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        return Finding(False, "not installed")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(False, f"does not run: {exc}")
    out = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0:
        return Finding(False, f"does not run: {out[-1] if out else done.returncode}")
    return Finding(True, out[0] if out else "present")


def _python_venv() -> Finding:
    # What the coding agent's checks run a repository's Python with: the system's python3,
    # which needs its venv module (Debian ships ensurepip separately) to make environments.
    found = _version(["python3", "-c", "import ensurepip, venv, platform; "
                                       "print(platform.python_version())"])
    return found if found.ok else Finding(False, "python3 without venv/ensurepip: " + found.detail)


PARTS: dict[str, Part] = {p.name: p for p in (
    Part("chromium", "Chromium", f"{APT} chromium", lambda: _version([str(CHROMIUM), "--version"])),
    Part("git", "git", f"{APT} git", lambda: _version(["git", "--version"])),
    Part("ripgrep", "ripgrep", f"{APT} ripgrep", lambda: _version(["rg", "--version"])),
    Part("node", "Node.js and npm", f"{APT} nodejs npm",
         lambda: _version(["node", "--version"]) if shutil.which("npm")
         else Finding(False, "npm is not installed")),
    Part("python3-venv", "python3 with venv", f"{APT} python3 python3-venv", _python_venv),
    # The coding agent's checks run a Python repository's tests with `python3 -m pytest`:
    # the system's, unless the repository's environment installs its own.
    Part("pytest", "pytest for python3", f"{APT} python3-pytest",
         lambda: _version([shutil.which("python3", path=SYSTEM_PATH) or "python3", "-c",
                           "import pytest; print('pytest', pytest.__version__)"])),
)}


def add(part: Part) -> None:
    """A part a system's own code probes (the coding agent's sandbox); added on import of
    the system's job module, so through tasks.catalog in every process."""
    if PARTS.get(part.name, part) is not part:
        raise ValueError(f"system part {part.name} is added twice")
    PARTS[part.name] = part

_present: set[str] = set()  # a part found stays found for the process's life


def missing(names: Iterable[str]) -> list[tuple[Part, Finding]]:
    """The parts among `names` this machine lacks, with what was found of each (a part
    found once is not probed again; one missing is, since it may be installed meanwhile)."""
    lacking = []
    for name in names:
        if name in _present:
            continue
        found = PARTS[name].probe()
        if found.ok:
            _present.add(name)
        else:
            lacking.append((PARTS[name], found))
    return lacking


def require(job_type: str, names: Iterable[str]) -> None:
    """Refuse the job, naming each missing part and its install command, when one lacks."""
    lacking = missing(names)
    if lacking:
        what = "; ".join(f"{part.label} ({found.detail}): install it with `{part.fix}`"
                         for part, found in lacking)
        raise JobTypeUnavailable(job_type, f"this machine lacks {what} "
                                           "(`switchyard doctor` lists what it has)")
