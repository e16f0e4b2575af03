"""A job type whose module cannot be imported takes only itself down.

Runs in a fresh interpreter where `playwright` cannot be imported (what a partial install
looks like), against the session's real PostgreSQL: the browser check answers 422
`job_type_unavailable` naming the package; a canary, a chat and a launch still enqueue,
and the canary runs to completion through the real runner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.web import create_app
from tests.integration.test_code_routes import _auth

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys, time
sys.modules["playwright"] = None  # as if the package were not installed
from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg, runner

with session_scope(session_factory()) as session:
    _, token = create_token(session, "partial")
auth = {"Authorization": f"Bearer {token}"}
client = create_app().test_client()
pid = client.post("/api/projects", headers=auth, json={"name": "p"}).json["id"]
out = {}
r = client.post(f"/api/projects/{pid}/jobs", headers=auth,
                json={"job_type": "browser.check_page", "payload": {"url": "https://x.test"}})
out["browser"] = [r.status_code, r.json]
r = client.post(f"/api/projects/{pid}/jobs", headers=auth,
                json={"job_type": "system.canary", "payload": {"steps": 2, "step_seconds": 0}})
out["canary"] = [r.status_code, r.json]
# Run here; when the session's Celery worker took it first, this run steps aside
# ("skipped") and that worker finishes it.
runner.run_job(r.json["job_id"])
for _ in range(600):
    status = pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s", (r.json["job_id"],))
    if status not in ("queued", "running"):
        break
    time.sleep(0.1)
out["canary_status"] = status
r = client.post(f"/api/projects/{pid}/chat", headers=auth, json={"message": "hi"})
out["chat"] = r.status_code
r = client.post(f"/api/projects/{pid}/launch", headers=auth, json={})
out["launch"] = r.status_code
print("RESULT " + json.dumps(out))
"""


def test_an_unimportable_handler_module_fails_only_its_own_job_types(db) -> None:
    # Given a process in which playwright cannot be imported
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, done.stdout + done.stderr
    out = json.loads(lines[-1].removeprefix("RESULT "))

    # Then the browser check is refused with the reason, and nothing else is touched
    status, body = out["browser"]
    assert status == 422, body
    assert body["error"]["code"] == "job_type_unavailable"
    assert "playwright" in body["error"]["message"]
    assert body["error"]["details"]["job_type"] == "browser.check_page"
    assert out["canary"][0] == 202
    assert out["canary_status"] == "completed"
    assert out["chat"] == 202 and out["launch"] == 202
    # And the failure is logged once, naming the job type
    assert done.stderr.count("job types browser.check_page are unavailable") == 1, done.stderr


def test_a_missing_system_part_fails_only_the_job_that_needs_it(
        worker, project, tmp_path, monkeypatch) -> None:
    # Given a machine without Chromium
    from tasks.engine import system_parts
    from tasks.engine.enqueue import EnqueueRequest, enqueue
    from tests.integration.jobdb import wait_for

    monkeypatch.setattr(system_parts, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(system_parts, "_present", set())

    # When a page check and a canary run
    check = enqueue(EnqueueRequest(project_id=project, job_type="browser.check_page",
                                   payload={"url": "https://example.com"}))
    canary = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                    payload={"steps": 1}))

    # Then the check fails at once, for good, saying what is missing and how to install it
    failed = wait_for(check.job_id, "failed", "completed", timeout=30)
    assert failed["status"] == "failed" and failed["attempts"] == 1
    assert "Chromium (not installed)" in failed["last_error"]
    assert "apt-get install -y chromium" in failed["last_error"]
    assert "switchyard doctor" in failed["last_error"]
    # And the canary is untouched
    assert wait_for(canary.job_id, "completed", "failed", timeout=30)["status"] == "completed"


def test_a_client_asking_for_a_job_this_machine_cannot_run_gets_a_422(
        db, tmp_path, monkeypatch) -> None:
    # API.md: "A job type whose system part is missing on this machine: 422
    # job_type_unavailable with the reason and the fix". It answered 202, and the job failed.
    from tasks.engine import system_parts
    from tests.integration.jobdb import tuples

    monkeypatch.setattr(system_parts, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setattr(system_parts, "_present", set())
    client = create_app().test_client()
    auth = _auth("alice")
    pid = client.post("/api/projects", headers=auth, json={"name": "A"}).json["id"]
    check = {"job_type": "browser.check_page", "payload": {"url": "https://example.com"}}
    one = client.post(f"/api/projects/{pid}/jobs", headers=auth, json=check)
    assert one.status_code == 422, one.json
    error = one.json["error"]
    assert error["code"] == "job_type_unavailable"
    assert "apt-get install -y chromium" in error["message"]
    batch = client.post(f"/api/projects/{pid}/jobs:batch", headers=auth,
                        json={"jobs": [check, {"job_type": "system.canary"}]})
    assert batch.status_code == 207, batch.json
    refused, accepted = batch.json["items"]
    assert refused["status"] == 422 and refused["error"]["code"] == "job_type_unavailable"
    assert accepted["status"] == 202
    # And a workflow cannot be saved with a step this machine cannot run
    flow = client.post(f"/api/projects/{pid}/workflows", headers=auth, json={
        "name": "qa", "steps": [{"name": "look", **check}]})
    assert flow.status_code == 422 and "chromium" in flow.get_data(True), flow.json
    assert tuples("SELECT job_type FROM agent_jobs WHERE project_id = %s", (pid,)) == [
        ("system.canary",)]
