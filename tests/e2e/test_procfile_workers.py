"""The Procfile's two workers on one host, started as its lines say (`switchyard worker`):
both stay up and serve. On RabbitMQ two workers with Celery's default node name
(celery@<host>) could not both hold the node's exclusive pidbox queue: one died with
RESOURCE_LOCKED at start, and `switchyard up` stopped everything with it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p

pytestmark = pytest.mark.e2e

SWITCHYARD = str(Path(sys.executable).parent / "switchyard")
PROCFILE = {"worker": "worker -Q default,agents,io,browser",
            "sweeper": "worker -Q sweeps -P solo -c 1"}


def test_the_procfiles_worker_and_sweeper_run_side_by_side_and_serve(
        procs: p.Procs, project: str) -> None:
    started = {name: procs._spawn(name, [SWITCHYARD, *line.split()])
               for name, line in PROCFILE.items()}
    for name, proc in started.items():
        procs.wait(lambda proc=proc: p._heartbeat_seen(proc.pid), 30, f"{name} ready")
    procs.beat("beat")
    job_id = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                    payload={"steps": 2})).job_id
    procs.wait(lambda: p.status(job_id) == "completed", 30, "the canary")
    time.sleep(3)  # a clash at the broker ends a worker within a second or two of its start
    for name, proc in started.items():
        assert proc.alive(), f"{name} exited:\n{proc.tail()}"
    names = [line.split("celery@")[0] for proc in started.values() for line in
             proc.text().splitlines() if "ready." in line]
    assert len(names) == 2, procs.report()
