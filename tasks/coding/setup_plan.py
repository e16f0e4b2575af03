"""What a repository declares it needs, and the commands that install it (pure: files in,
a plan out; tasks.coding.environments runs it).

Python: a virtualenv (with the system's site packages underneath, so Debian's pytest is there
when the repository does not pin its own) filled from `requirements*.txt`,
`test_requirements.txt`, `requirements/*.txt`, then the project itself, editable, with its
`test`/`tests`/`testing`/`dev` extras (`pyproject.toml`, `setup.py`, `setup.cfg`). Node:
`npm ci` from a lock file, else `npm install`, in the environment (bound over the checkout's
`node_modules`). Go and Rust: their module caches, where the toolchain exists. Then the
repository's own `.switchyard/setup.sh` and the project's `code_setup` commands, in order.
Every command runs in the sandbox at /workspace, the environment at ENV.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.coding import repo_files
from tasks.coding.bwrap_fence import ENV_DIR, TOOLS_DIR, WORKSPACE

ENV = ENV_DIR
VENV = f"{ENV}/venv"
NODE = f"{ENV}/node"
TEST_EXTRAS = ("test", "tests", "testing", "dev")
SETUP_SCRIPT = ".switchyard/setup.sh"
LOCK_FILES = ("package-lock.json", "npm-shrinkwrap.json")
MAX_REQUIREMENT_FILES = 20


@dataclass(frozen=True)
class SetupPlan:
    kinds: tuple[str, ...]  # what is set up: python, node, go, rust, script, project
    files: tuple[str, ...]  # the files the environment depends on (its key)
    commands: tuple[tuple[str, str], ...]  # (what, shell command), run in order
    notes: tuple[str, ...] = ()  # what could not be set up, and why
    variables: dict[str, str] = field(default_factory=dict)  # every later command's

    @property
    def empty(self) -> bool:
        return not self.commands


def plan_setup(root: Path, *, installer: str, toolchains: frozenset[str],
               project_commands: tuple[str, ...] = ()) -> SetupPlan:
    """installer: "uv" or "pip"; toolchains: which of go, cargo this machine has."""
    kinds: list[str] = []
    files: list[str] = []
    commands: list[tuple[str, str]] = []
    notes: list[str] = []
    # A setup script may make the virtualenv itself, or put tools in ENV/bin.
    variables: dict[str, str] = {"SWITCHYARD_ENV": ENV, "PATH_PREFIX": f"{VENV}/bin:{ENV}/bin"}
    python = _python(root, installer)
    if python is not None:
        kinds.append("python")
        files += python[0]
        commands += python[1]
        variables["VIRTUAL_ENV"] = VENV
    if repo_files.regular(root / "package.json") and _has_dependencies(root / "package.json"):
        kinds.append("node")
        lock = next((f for f in LOCK_FILES if repo_files.regular(root / f)), None)
        files += ["package.json", *([lock] if lock else [])]
        install = "npm ci" if lock else "npm install"
        copied = " ".join(shlex.quote(f"{WORKSPACE}/{f}") for f in ("package.json", lock) if f)
        commands.append(("npm", f"mkdir -p {NODE} && cp {copied} {NODE}/ && cd {NODE} && "
                                f"{install} --no-audit --no-fund --ignore-scripts=false"))
    for marker, tool, kind, command, cache in (
            ("go.mod", "go", "go", "go mod download", {"GOMODCACHE": f"{ENV}/go/mod",
                                                       "GOFLAGS": "-mod=mod"}),
            ("Cargo.toml", "cargo", "rust", "cargo fetch", {"CARGO_HOME": f"{ENV}/cargo"})):
        if repo_files.regular(root / marker):
            if tool in toolchains:
                kinds.append(kind)
                files.append(marker)
                commands.append((kind, command))
                variables.update(cache)
            else:
                notes.append(f"not set up: no {tool} toolchain on this worker ({marker})")
    if repo_files.regular(root / SETUP_SCRIPT):
        kinds.append("script")
        files.append(SETUP_SCRIPT)
        commands.append(("setup.sh", f"bash {WORKSPACE}/{SETUP_SCRIPT}"))
    if project_commands:
        kinds.append("project")
        commands += [(f"code_setup {i}", c) for i, c in enumerate(project_commands, start=1)]
    return SetupPlan(tuple(kinds), tuple(files), tuple(commands), tuple(notes), variables)


def environment_key(root: Path, plan: SetupPlan, *, project: str, repository: str,
                    installer: str, python_version: str) -> str:
    """The same project, repository, dependency files and setup: the same environment. Never
    shared between projects: the setup ran code the repository holds, and an environment
    one tenant's task built must not run in another's."""
    digest = hashlib.sha256()
    for part in (project, repository, installer, python_version, *plan.kinds,
                 *(c for _, c in plan.commands)):
        digest.update(part.encode() + b"\0")
    for name in plan.files:
        digest.update(name.encode() + b"\0")
        _hash_file(root / name, digest)
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def _hash_file(path: Path, digest: Any) -> None:
    """The file's bytes, whatever its size, never through a link (a lock file is often
    megabytes: two that differ past a cap must not share an environment)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        digest.update(b"(unreadable)")
        return
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            digest.update(b"(not a file)")
            return
        while chunk := f.read(1 << 20):
            digest.update(chunk)


def _python(root: Path, installer: str) -> tuple[list[str], list[tuple[str, str]]] | None:
    requirements = _requirement_files(root)
    project, extras = _project(root)
    if not requirements and project is None:
        return None
    if installer == "uv":
        uv = f"{TOOLS_DIR}/uv"
        make = (f"[ -x {VENV}/bin/python ] || {uv} venv --quiet --system-site-packages "
                f"--python /usr/bin/python3 {VENV}")
        pip = f"{uv} pip install --python {VENV}/bin/python"
    else:
        make = f"[ -x {VENV}/bin/python ] || python3 -m venv --system-site-packages {VENV}"
        pip = f"{VENV}/bin/python -m pip install --disable-pip-version-check --quiet"
    commands = [("venv", make)]
    if requirements:
        commands.append(("requirements", pip + " " + " ".join(
            f"-r {shlex.quote(f'{WORKSPACE}/{r}')}" for r in requirements)))
    if project is not None:
        target = WORKSPACE + (f"[{','.join(extras)}]" if extras else "")
        commands.append(("project", f"{pip} -e {shlex.quote(target)}"))
    return [*requirements, *([project] if project else [])], commands


def _requirement_files(root: Path) -> list[str]:
    names = sorted(p.name for p in _children(root) if p.name.endswith(".txt")
                   and (p.name.startswith("requirements") or p.name in (
                       "test_requirements.txt", "test-requirements.txt",
                       "requirements_test.txt", "dev-requirements.txt")))
    nested = sorted(f"requirements/{p.name}" for p in _children(root / "requirements")
                    if p.name.endswith(".txt"))
    return [n for n in [*names, *nested] if repo_files.regular(root / n)][:MAX_REQUIREMENT_FILES]


def _project(root: Path) -> tuple[str | None, list[str]]:
    """The file that makes the checkout an installable project, and its test extras."""
    pyproject = repo_files.toml(root / "pyproject.toml")  # {} when missing or odd
    table = repo_files.table(pyproject.get("project"))
    if table or "build-system" in pyproject:
        declared = repo_files.table(table.get("optional-dependencies"))
        return "pyproject.toml", [e for e in TEST_EXTRAS if e in declared]
    if repo_files.regular(root / "setup.cfg"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(repo_files.text(root / "setup.cfg"))
        except configparser.Error:
            return "setup.cfg", []
        extras = set(parser["options.extras_require"]) if parser.has_section(
            "options.extras_require") else set()
        if repo_files.regular(root / "setup.py") or parser.has_section("metadata"):
            return "setup.cfg", [e for e in TEST_EXTRAS if e in extras]
    if repo_files.regular(root / "setup.py"):
        return "setup.py", []
    return None, []


def _has_dependencies(package_json: Path) -> bool:
    data: Any = repo_files.json_file(package_json)
    return isinstance(data, dict) and any(
        isinstance(data.get(k), dict) and data.get(k) for k in (
            "dependencies", "devDependencies", "optionalDependencies"))


def _children(directory: Path) -> list[Path]:
    if directory.is_symlink() or not directory.is_dir():
        return []
    return [p for p in directory.iterdir() if repo_files.regular(p)]


