"""The chaos suite's hands on its private stack: a process configured for it, fed JSON lines.

The test process is configured for the session's database and broker; this one
(started with the chaos stack's DATABASE_URL and BROKER_URL) enqueues through
the engine's own code, approves effects as a person would, and publishes
duplicate wake-ups exactly as the dispatch sweep does. Each request is one JSON
line on stdin, each answer one on stdout. A request made while PostgreSQL is
restarting is retried until it goes through (the injector restarts it at random).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import tasks.catalog  # noqa: F401 - registers every job type, as the worker and web do
from tasks.engine import pg
from tasks.engine.dispatch import dispatch
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.services.approvals import NewApproval, create_approval, decide
from tests.integration.jobdb import tuple_row, tuples

RETRY_FOR = 60.0


def setup(_: dict[str, Any]) -> dict[str, Any]:
    owner, project = uuid.uuid4(), uuid.uuid4()
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, 'chaos') ON CONFLICT DO NOTHING",
               (owner,))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'chaos')",
               (project, owner))
    return {"owner": str(owner), "project": str(project)}


def submit(req: dict[str, Any]) -> dict[str, Any]:
    # The key makes a retried request (after a restart cut it) enqueue nothing twice.
    job = enqueue(EnqueueRequest(project_id=req["project"], job_type="system.canary",
                                 payload=req["payload"], idempotency_key=req["key"]))
    return {"job": str(job.job_id)}


def approve(req: dict[str, Any]) -> dict[str, Any]:
    # Looked up first: a retry after a lost answer must not ask (and deploy) twice.
    row = tuple_row("SELECT id, execution_job_id FROM approvals WHERE project_id = %s "
                    "AND title = %s", (req["project"], req["title"]))
    args = {"url": req["url"], "status_url": req["url"]}
    approval = row[0] if row else create_approval(
        req["project"], None, NewApproval("deploy_hook", req["title"], args))
    job = row[1] if row and row[1] else decide(approval, req["owner"], "approved", 1)
    return {"approval": str(approval), "job": str(job)}


def wake(req: dict[str, Any]) -> dict[str, Any]:
    rows = tuples("SELECT id, queue, priority FROM agent_jobs WHERE id = ANY(%s::uuid[])",
                  (req["jobs"],))
    for job_id, queue, priority in rows:
        dispatch(job_id, queue, priority)
    return {"published": len(rows)}


OPS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "setup": setup, "submit": submit, "approve": approve, "wake": wake}


def _answer(req: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + RETRY_FOR
    while True:
        try:
            return OPS[req["op"]](req)
        except Exception as exc:
            if time.monotonic() > deadline:
                return {"error": f"{type(exc).__name__}: {exc}"}
            pg.reset()
            time.sleep(0.2)


def main() -> None:
    for line in sys.stdin:
        print(json.dumps(_answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
