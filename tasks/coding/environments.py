"""Set-up environments: a repository's dependencies installed once per (repository, dependency
files), kept under data_dir/environments, reused by every later task on the same repository.

The setup phase runs the plan (tasks.coding.setup_plan) in the sandbox with the network of
the "setup" egress mode (package index hosts alone), the environment bound writable at
ENV_DIR; every other command gets it read-only, so neither the agent nor a repository's tests
can change what the next task starts from. An environment is built in a directory of its own
and renamed into place when its last command succeeded, under a lock, so two tasks on the same
repository install once and a worker killed mid-install leaves nothing that looks ready (and
the next attempt finishes that build rather than starting over).
The oldest environments go first when their total passes SWITCHYARD_CODE_ENV_MAX_BYTES.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.coding import setup_plan
from tasks.coding.bwrap_fence import TOOLS_DIR
from tasks.coding.fence import SANDBOX_PATH, EnvMounts, RunPolicy
from tasks.coding.sandbox import hand_over, run_command
from tasks.services import package_indexes
from tasks.settings import get_settings

IN_USE_SECONDS = 6 * 3600  # an environment set up this recently may be in use
OUTPUT_CHARS = 20_000  # of the setup's output, what the step (and the job page) keeps
STALE_BUILD_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Installer:
    name: str  # "uv" or "pip"
    tools: Path | None  # the directory holding the uv binary, bound at TOOLS_DIR


def installer() -> Installer:
    """uv when the worker has it (a dependency of Switchyard's), pip otherwise. The binary is
    copied beside the environments: the sandbox user can pass through the data dir (doctor
    checks that), not necessarily through wherever the worker's virtualenv lives."""
    try:
        from uv import find_uv_bin
        found: str | None = find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
    if not found or not Path(found).is_file():
        return Installer("pip", None)
    tools = root_dir() / ".tools"
    copy = tools / "uv"
    if not copy.is_file() or copy.stat().st_size != Path(found).stat().st_size:
        tools.mkdir(parents=True, exist_ok=True)
        tools.chmod(0o755)
        partial = tools / f"uv.{os.getpid()}"
        shutil.copyfile(found, partial)
        partial.chmod(0o755)
        partial.replace(copy)
    return Installer("uv", tools)


def toolchains() -> frozenset[str]:
    return frozenset(t for t in ("go", "cargo") if shutil.which(t))


def root_dir() -> Path:
    return get_settings().data_dir / "environments"


# What test runners write inside node_modules: vitest its results (.vite/vitest), babel and
# others their caches (.cache). Read-only, vitest exited 1 with EROFS after every test passed.
NODE_CACHES = (".vite", ".cache")


def path_for(key: str) -> Path:
    return root_dir() / key


def mounts(key: str, plan_variables: dict[str, str], *, writable: bool = False,
           building: Path | None = None, tools: Path | None = None) -> EnvMounts:
    """How commands see the environment `key` (or the one being built in `building`)."""
    where = building or path_for(key)
    prefix = plan_variables.get("PATH_PREFIX")
    variables = {k: v for k, v in plan_variables.items() if k != "PATH_PREFIX"}
    variables["PATH"] = f"{prefix}:{SANDBOX_PATH}" if prefix else SANDBOX_PATH
    node = where / "node" / "node_modules"
    bound = not writable and _inside(node, where)
    return EnvMounts(root=where, writable=writable, node_modules=node if bound else None,
                     node_caches=tuple(n for n in NODE_CACHES
                                       if bound and _inside(node / n, where)),
                     tools=tools, variables=variables)


def _inside(path: Path, root: Path) -> bool:
    """A real directory under `root`, no link on the way: bubblewrap binds a source by its
    resolved path, and the setup (tenant code) wrote everything under root."""
    here = path
    while here != root:
        if here.is_symlink() or not here.exists():
            return False
        here = here.parent
    return path.is_dir() and os.path.realpath(path).startswith(os.path.realpath(root) + "/")


def marker(key: str) -> Path:
    """Beside the environment, never in it: the setup wrote its tree, and a link it planted
    there must not make the worker write through it."""
    return root_dir() / f"{key}.ready"


def is_ready(key: str) -> bool:
    return marker(key).is_file() and path_for(key).is_dir()


def python_version() -> str:
    """The interpreter every venv is made from (setup_plan): part of the key."""
    return os.path.realpath("/usr/bin/python3")


def set_up(root: Path, plan: setup_plan.SetupPlan, key: str, policy: RunPolicy,
           tools: Installer) -> dict[str, Any]:
    """The environment for `key`: reused when ready, else installed now. Its outcome, for the
    step: {"key", "status": reused|installed|failed|nothing, "seconds", "output", ...}."""
    started = time.monotonic()
    if plan.empty:
        return {"key": key, "status": "nothing", "seconds": 0.0, "output": "",
                "kinds": list(plan.kinds), "notes": list(plan.notes)}
    root_dir().mkdir(parents=True, exist_ok=True)
    with _locked(key):
        if is_ready(key):
            touch(key)
            return {"key": key, "status": "reused", "kinds": list(plan.kinds),
                    "notes": list(plan.notes), "output": "",
                    "seconds": round(time.monotonic() - started, 3)}
        # One build directory per key, kept when its worker dies: the next attempt (the job
        # resumed elsewhere, under the same lock) installs into it again, and the installers
        # skip what is already there, so a kill mid-install costs no second install.
        building = root_dir() / f"{key}.building"
        building.mkdir(mode=0o755, exist_ok=True)
        hand_over([building], policy)
        setup_policy = RunPolicy(
            timeout_seconds=get_settings().code_setup_timeout_seconds,
            memory_mb=max(policy.memory_mb, 4096), output_chars=policy.output_chars,
            network=True, egress="setup", uid=policy.uid, gid=policy.gid,
            env=mounts(key, {**plan.variables, **package_indexes.sandbox_variables(),
                             "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CACHE": "1",
                             "UV_LINK_MODE": "copy", "SWITCHYARD_TOOLS": TOOLS_DIR},
                       writable=True, building=building, tools=tools.tools))
        output, failed = [], None
        for what, command in plan.commands:
            ran = run_command(root, command, setup_policy)
            output.append(f"$ {command}\n{ran.output}")
            if ran.exit_code != 0:
                failed = (f"{what} failed" + (" (timed out)" if ran.timed_out else
                                              f" (exit {ran.exit_code})"))
                break
        text = _cut("\n".join(output))
        if failed is not None:
            shutil.rmtree(building, ignore_errors=True)
            return {"key": key, "status": "failed", "error": failed, "output": text,
                    "kinds": list(plan.kinds), "notes": list(plan.notes),
                    "seconds": round(time.monotonic() - started, 3)}
        node_modules = building / "node" / "node_modules"
        if node_modules.is_dir() and not node_modules.is_symlink():
            for name in NODE_CACHES:  # where each command gets a writable dir of its own
                (node_modules / name).mkdir(exist_ok=True)
        seconds = round(time.monotonic() - started, 3)
        size = _size(building)
        if (over := _over_share(size)) is not None:
            shutil.rmtree(building, ignore_errors=True)
            return {"key": key, "status": "failed", "error": over, "output": text,
                    "kinds": list(plan.kinds), "notes": list(plan.notes), "seconds": seconds}
        shutil.rmtree(path_for(key), ignore_errors=True)
        building.rename(path_for(key))
        marker(key).write_text(json.dumps({
            "kinds": list(plan.kinds), "files": list(plan.files), "seconds": seconds,
            "bytes": size}))
    evict(keep=key)
    return {"key": key, "status": "installed", "kinds": list(plan.kinds),
            "notes": list(plan.notes), "output": text, "seconds": seconds}


SHARE = 4  # one environment may take 1/SHARE of the budget


def _over_share(size: int) -> str | None:
    """Why an environment of `size` bytes is not kept: the setup is the tenant's code, and
    every kept environment stays on the disk PostgreSQL shares (the budget's eviction spares
    what was used lately, so it cannot be what bounds one tenant)."""
    share = get_settings().code_env_max_bytes // SHARE
    if size <= share:
        return None
    mib = 1024 * 1024
    return (f"the set-up environment holds {size / mib:.0f} MiB, over the {share / mib:.0f} "
            f"MiB one may take (a {SHARE}th of SWITCHYARD_CODE_ENV_MAX_BYTES): not kept")


def evict(keep: str | None = None) -> list[str]:
    """Remove the least recently used environments until the rest fit the budget, and builds
    a dead worker left behind. Returns the keys removed."""
    budget = get_settings().code_env_max_bytes
    base = root_dir()
    if not base.is_dir():
        return []
    removed = []
    now = time.time()
    for leftover in base.glob("*.building"):
        if now - leftover.stat().st_mtime > STALE_BUILD_SECONDS:
            shutil.rmtree(leftover, ignore_errors=True)
    ready = sorted(((p.stat().st_mtime, p) for p in base.glob("*.ready")), key=lambda t: t[0])
    total = sum(_recorded_size(m) for _, m in ready)
    for used, mark in ready:
        if not budget or total <= budget:
            break
        key = mark.name.removesuffix(".ready")
        # One in use lately may be under a running job's commands: it stays, over budget.
        if key == keep or now - used < IN_USE_SECONDS:
            continue
        total -= _recorded_size(mark)
        with _locked(key):
            mark.unlink(missing_ok=True)
            shutil.rmtree(path_for(key), ignore_errors=True)
        removed.append(key)
    return removed


@contextmanager
def _locked(key: str) -> Iterator[None]:
    with open(root_dir() / f"{key}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def touch(key: str) -> None:
    """Used now: the least recently used goes first, and one used lately not at all."""
    with contextlib.suppress(OSError):
        os.utime(marker(key))


def _recorded_size(mark: Path) -> int:
    try:
        return int(json.loads(mark.read_text()).get("bytes", 0))
    except (OSError, ValueError):
        return 0


def _size(directory: Path) -> int:
    total = 0
    for base, _, names in os.walk(directory):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(base, name)).st_size
    return total


def _cut(text: str) -> str:
    if len(text) <= OUTPUT_CHARS:
        return text
    half = OUTPUT_CHARS // 2
    return f"{text[:half]}\n… ({len(text) - OUTPUT_CHARS} characters cut) …\n{text[-half:]}"

