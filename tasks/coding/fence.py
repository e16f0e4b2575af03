"""What both of the coding sandbox's fences share: the policy a command runs under, the
environment it sees, the user it runs as under a root worker, and the refusal."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tasks.engine.errors import PermanentError
from tasks.engine.system_parts import SYSTEM_PATH as SANDBOX_PATH
from tasks.settings import get_settings

SANDBOX_UID = SANDBOX_GID = 65534  # nobody / nogroup


class SandboxUnavailable(PermanentError):
    """This machine cannot fence a command as asked: refuse rather than run it unfenced."""


@dataclass(frozen=True)
class EnvMounts:
    """A repository's set-up environment as a command sees it (tasks.coding.environments)."""

    root: Path  # bound at bwrap_fence.ENV_DIR
    writable: bool = False  # only while the setup phase fills it
    node_modules: Path | None = None
    # Directories in node_modules a test runner writes to (vitest's results in .vite), which
    # a command gets writable, its own and empty, over the read-only node_modules
    node_caches: tuple[str, ...] = ()
    tools: Path | None = None  # the worker's installers (uv), for the setup phase
    variables: dict[str, str] = field(default_factory=dict)  # PATH first, VIRTUAL_ENV, ...


@dataclass
class RunPolicy:
    timeout_seconds: float
    memory_mb: int
    output_chars: int
    network: bool = False
    # Where the network goes (tasks.services.egress_proxy): "guarded", the egress guard of
    # tenant calls; "setup", the package index hosts alone (SWITCHYARD_CODE_SETUP_HOSTS).
    egress: str = "guarded"
    env: EnvMounts | None = None  # the repository's set-up environment, when it has one
    max_processes: int = 512  # RLIMIT_NPROC: counts threads too, per uid
    max_file_mb: int = 1024  # RLIMIT_FSIZE: one file, not the disk
    uid: int = SANDBOX_UID  # used when the worker runs as root
    gid: int = SANDBOX_GID

    @classmethod
    def from_settings(cls, network: bool = False) -> RunPolicy:
        s = get_settings()
        return cls(timeout_seconds=s.code_run_timeout_seconds, memory_mb=s.code_run_memory_mb,
                   output_chars=s.code_run_output_chars, network=network)


def sandbox_env(home: Path, tmp: Path | None = None) -> dict[str, str]:
    """The whole environment a command sees: nothing of the worker's (DATABASE_URL, keys).

    PYTHONNOUSERSITE: a `.pth` file under ~/.local is code Python runs at every start; HOME
    is the command's own, but a tool run later in it must not pick up what an earlier step
    of the same command planted there either.
    """
    return {"PATH": SANDBOX_PATH, "HOME": str(home), "TMPDIR": str(tmp or home),
            "LANG": "C.UTF-8", "TERM": "dumb", "CI": "true", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1"}


def unpassable(path: Path, uid: int, gid: int) -> Path | None:
    """The first directory on the way to `path` (itself included) that uid:gid cannot pass
    through, else None. bubblewrap, run as the sandbox user, opens the paths it binds by
    name, so every directory on the way must be searchable by that user, not just by the
    worker."""
    here = Path(os.path.abspath(path))
    for directory in [*reversed(here.parents), here]:
        try:
            st = directory.stat()
        except OSError:
            return None  # not made yet: the worker makes it, with its own modes
        if stat.S_ISDIR(st.st_mode) and not searchable(st.st_mode, st.st_uid, st.st_gid,
                                                       uid, gid):
            return directory
    return None


def searchable(mode: int, owner: int, group: int, uid: int, gid: int) -> bool:
    """Whether uid:gid (no supplementary groups: setpriv clears them) may search a
    directory of this mode and ownership."""
    if owner == uid:
        return bool(mode & stat.S_IXUSR)
    if group == gid:
        return bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IXOTH)
