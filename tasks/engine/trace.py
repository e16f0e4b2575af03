"""An optional journal of step executions, for chaos tests and forensics.

With SWITCHYARD_STEP_TRACE_DIR set, every step a worker actually runs (not a
replay) appends a `start` and an `end` line to a JSON-lines file of its process.
Times are the process's wall clock (`time.time()`): a reader comparing workers
corrects for a clock it knows to be off (the chaos suite's faketime'd worker).
Not CLOCK_MONOTONIC: faketime cannot shift it by an offset (it replaces it), and
with it left alone Python's sleeps fail under faketime. Lines are written with
O_APPEND straight to the kernel: a kill -9 loses nothing written.
"""

from __future__ import annotations

import json
import os
import time

from tasks.settings import get_settings

_fd: dict[int, int] = {}  # pid -> file descriptor (a forked child opens its own)


def _file() -> int | None:
    directory = get_settings().step_trace_dir
    if not directory:
        return None
    pid = os.getpid()
    if pid not in _fd:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"steps-{pid}.jsonl")
        _fd[pid] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return _fd[pid]


def step(event: str, job_id: object, seq: int, name: str, run: object,
         ok: bool | None = None) -> None:
    """Record that step `seq` of `job_id` started or ended in run `run` (its claim token)."""
    fd = _file()
    if fd is None:
        return
    line = {"ev": event, "job": str(job_id), "seq": seq, "name": name, "run": str(run),
            "pid": os.getpid(), "t": time.time()}
    if ok is not None:
        line["ok"] = ok
    os.write(fd, (json.dumps(line) + "\n").encode())
