"""The orphan sweep: checkouts a killed worker left behind go once they are a day old and
their job is not live; anything else under the workspaces directory stays."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from tasks.coding import checkouts
from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.settings import get_settings

DAY = 24 * 3600


def _checkout(name: str, age: float) -> Path:
    root = get_settings().workspaces_dir
    for path in (root / name, root / f"{name}.git"):
        path.mkdir(parents=True, exist_ok=True)
        (path / "file").write_text("x")
        then = time.time() - age
        os.utime(path, (then, then))
    return root / name


def _job(project: str, status: str) -> str:
    job = enqueue(EnqueueRequest(project_id=project, job_type="system.canary"), publish=False)
    pg.execute("UPDATE agent_jobs SET status = %s WHERE id = %s", (status, job.job_id))
    return str(job.job_id)


def test_old_checkouts_of_ended_or_unknown_jobs_are_swept_and_live_ones_kept(project) -> None:
    rows = [  # (checkout, should it go, why)
        (_checkout(_job(project, "failed"), 2 * DAY), True, "its job failed"),
        (_checkout(_job(project, "canceled"), 2 * DAY), True, "its job was canceled"),
        (_checkout(str(uuid.uuid4()), 2 * DAY), True, "no such job (retention took it)"),
        (_checkout(_job(project, "running"), 2 * DAY), False, "its job still runs"),
        (_checkout(_job(project, "waiting"), 2 * DAY), False, "its job waits"),
        (_checkout(_job(project, "completed"), 3600), False, "under a day old"),
        (_checkout("not-a-job", 2 * DAY), False, "not a checkout of ours"),
    ]
    removed = checkouts.remove_orphans()
    assert removed == 3
    for path, goes, why in rows:
        gone = not path.exists() and not Path(f"{path}.git").exists()
        assert gone == goes, why
