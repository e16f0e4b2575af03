"""How Chromium is started for a tenant's page: sandboxed, with nothing of the worker's.

A page check renders a page a tenant chose, so a renderer bug must not become code running
next to every tenant's data. Chromium runs with its own sandbox on (Playwright would add
`--no-sandbox` otherwise), inside bubblewrap with no network (every request is answered by
the egress guard through Playwright's routing, tasks.startup.browser_check), no view of
the data directory or the checkout, and an environment of PATH, HOME and LANG only; as
the unprivileged `nobody` when the worker is root (Chromium refuses its sandbox as root).
Without bubblewrap, an ordinary user's worker still gets Chromium's own sandbox and the
clean environment; a root worker refuses, naming the package to install.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tasks.engine.errors import PermanentError
from tasks.engine.system_parts import APT, CHROMIUM

NOBODY = 65534
# What Chromium reads: the system's programs and libraries, fonts and certificates in /etc.
FILESYSTEM = ("--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
              "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
              "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm")
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
# WebRTC may not send UDP around the (absent) proxy: with no network it could not anyway,
# and the flag keeps it so where bubblewrap is not in use.
FLAGS = ("--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
         "--webrtc-ip-handling-policy=disable_non_proxied_udp")


@dataclass(frozen=True)
class Launch:
    executable: str
    env: dict[str, str | float | bool]
    args: tuple[str, ...] = FLAGS


def command(bwrap: str, chromium: str, *, as_root: bool) -> list[str]:
    """The argv that starts `chromium` (its own arguments follow) in the sandbox."""
    drop = ["/usr/bin/setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--"] if as_root else []
    return [*drop, bwrap, "--unshare-all", "--die-with-parent", "--new-session", *FILESYSTEM,
            "--clearenv", *[a for k, v in ENV.items() for a in ("--setenv", k, v)], chromium]


@contextmanager
def launch() -> Iterator[Launch]:
    """What Playwright launches: a wrapper script exec'ing Chromium in bubblewrap."""
    bwrap = shutil.which("bwrap")
    as_root = os.geteuid() == 0
    if bwrap is None:
        if as_root:
            raise PermanentError("a page check run by a root worker needs bubblewrap to drop "
                                 f"Chromium's privileges: {APT} bubblewrap")
        yield Launch(str(CHROMIUM), dict(ENV))
        return
    folder = Path(tempfile.mkdtemp(prefix="switchyard-chromium-"))
    try:
        wrapper = folder / "chromium"
        argv = " ".join(shlex.quote(a) for a in command(bwrap, str(CHROMIUM), as_root=as_root))
        wrapper.write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        wrapper.chmod(0o755)
        folder.chmod(0o755)  # `nobody` must be able to reach it: setpriv runs first
        yield Launch(str(wrapper), dict(ENV))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
