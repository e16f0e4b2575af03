"""Real worker and beat processes for the end-to-end tests.

Every process is started in a session of its own, writes its output to a log
file under the test's tmp dir, and is killed (the whole process group, by id)
when the test ends, whatever the test's outcome.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import wait_until
from tests.integration.jobdb import tuple_row, tuples

ROOT = Path(__file__).resolve().parents[2]


def wait(predicate: Callable[[], object], timeout: float, what: str) -> Any:
    return wait_until(predicate, timeout=timeout, what=what)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
CELERY = [sys.executable, "-m", "celery", "-A", "tasks.celery_app"]
QUEUES = "default,agents,io,browser,sweeps"
POOL_BANNER = {"threads": "thread"}  # how the worker's banner names a pool


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log: Path
    started_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def kill9(self) -> None:
        """SIGKILL the process (and anything it forked) and reap it."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def wait_exit(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)


class Procs:
    """Starts workers and beats; `close()` kills whatever is still running."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.all: list[Proc] = []

    def _start(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Proc:
        return self._spawn(name, [*CELERY, *args], env)

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Proc:
        log = self.tmp / f"{name}.log"
        environ = os.environ.copy()
        environ["PYTHONUNBUFFERED"] = "1"
        environ.update(env or {})
        with log.open("wb") as out:
            popen = subprocess.Popen(
                cmd, cwd=ROOT, env=environ, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        proc = Proc(name, popen, log)
        self.all.append(proc)
        return proc

    def web(self, threads: int = 32, env: dict[str, str] | None = None) -> tuple[Proc, str]:
        """gunicorn's gthread worker, as in production; (process, base URL) once it answers."""
        port = free_port()
        proc = self._spawn("web", [sys.executable, "-m", "gunicorn", "-k", "gthread", "-w", "1",
                                   "--threads", str(threads), "-b", f"127.0.0.1:{port}",
                                   "app.web:create_app()"], env)
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.alive(), proc.tail()
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(base + "/healthz", timeout=1).status_code == 200
            return False

        self.wait(up, 30, "the web process to answer /healthz")
        return proc, base

    def worker(self, name: str, pool: str = "solo", concurrency: int = 1,
               env: dict[str, str] | None = None, ready: bool = True) -> Proc:
        proc = self._start(name, [
            "worker", "-P", pool, "-c", str(concurrency), "-n", f"{name}@%h", "-Q", QUEUES,
            "-l", "INFO", "--without-mingle", "--without-gossip", "--without-heartbeat",
        ], env)
        if ready:
            self.wait(lambda: _heartbeat_seen(proc.pid), 30, f"worker {name} ready")
            banner = POOL_BANNER.get(pool, pool)
            assert f"concurrency: {concurrency} ({banner})" in proc.text(), proc.tail()
        return proc

    def beat(self, name: str) -> Proc:
        return self._start(name, ["beat", "-s", str(self.tmp / f"{name}-schedule"), "-l", "INFO"])

    def wait(self, predicate: Callable[[], object], timeout: float, what: str) -> Any:
        """Poll until truthy (the failure report carries every process's log tail)."""
        return wait(predicate, timeout, what)

    def report(self, lines: int = 60) -> str:
        parts = []
        for p in self.all:
            state = "running" if p.alive() else f"exited {p.popen.returncode}"
            parts.append(f"----- {p.name} (pid {p.pid}, {state}) {p.log} -----\n{p.tail(lines)}")
        return "\n".join(parts)

    def close(self) -> None:
        for p in self.all:
            if p.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
        for p in self.all:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.popen.wait(timeout=10)


def _heartbeat_seen(pid: int) -> bool:
    return tuple_row("SELECT 1 FROM worker_heartbeats WHERE pid = %s AND stopped_at IS NULL",
                     (pid,)) is not None


# --- reading the truth from PostgreSQL --------------------------------------------------------

def job(job_id) -> dict:
    row = tuple_row("SELECT status, locked_by, attempts, last_error, result FROM agent_jobs "
                    "WHERE id = %s", (job_id,))
    assert row is not None, f"job {job_id} not found"
    return dict(zip(("status", "locked_by", "attempts", "last_error", "result"), row,
                    strict=True))


def status(job_id) -> str:
    return job(job_id)["status"]


def steps(job_id) -> dict[int, str]:
    """seq -> status of the job's step rows."""
    return dict(tuples("SELECT seq, status FROM job_steps WHERE job_id = %s ORDER BY seq",
                       (job_id,)))


def started_counts(job_id) -> dict[int, int]:
    """seq -> how many times the step started: its row's `attempts` (every start is counted
    there; a fast step announces its start by no event of its own)."""
    return dict(tuples("SELECT seq, attempts FROM job_steps WHERE job_id = %s ORDER BY seq",
                       (job_id,)))


def status_events(job_id) -> list[dict]:
    return [r[0] for r in tuples(
        "SELECT data FROM agent_job_events WHERE job_id = %s AND type = 'status' ORDER BY id",
        (job_id,))]
