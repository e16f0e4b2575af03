"""An unknown effect, the whole story, with real processes: a worker killed -9 while the deploy
hook is answering leaves an effect nobody can vouch for; the API shows it, refuses to approve
the same deploy again (and to retry its job) until a person resolves it, then lets it go.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tasks.services.approvals import NewApproval, create_approval
from tests.e2e import procs as p
from tests.e2e.procs import Procs
from tests.support.fake_providers import FakeProviders, fake_providers  # noqa: F401

pytestmark = pytest.mark.e2e


class Api:
    def __init__(self, base: str, token: str):
        self.base, self.headers = base, {"Authorization": f"Bearer {token}"}

    def __call__(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        return httpx.request(method, self.base + path, json=body, headers=self.headers,
                             timeout=10)


def test_an_effect_left_unknown_by_a_kill_9_is_shown_blocks_a_second_deploy_and_is_resolved(
        procs: Procs, fake_providers: FakeProviders) -> None:  # noqa: F811
    # Given a web process, an owner with a project, and a deploy hook that takes 5 s to answer
    # and cannot be asked afterwards whether it deployed (no status_url)
    _, base = procs.web(threads=8)
    with session_scope(session_factory()) as s:
        owner, token = create_token(s, f"founder-{uuid.uuid4().hex[:8]}")
    api = Api(base, token)
    project = api("POST", "/api/projects", {"name": "Tidewater"}).json()["id"]
    fake_providers.delay = 5.0
    args = {"url": f"{fake_providers.url}/deploy/site"}
    first = create_approval(project, None, NewApproval("deploy_hook", "Deploy the site", args))
    a = procs.worker("a", pool="solo")

    # When the founder approves it and worker A is killed -9 while the hook is answering
    r = api("POST", f"/api/inbox/{first}/decision", {"decision": "approved", "version": 1})
    assert r.status_code == 200, r.text
    job_id = r.json()["execution_job_id"]
    procs.wait(lambda: fake_providers.posts("/deploy/site"), 20, "the hook POST in flight")
    a.kill9()
    # and worker B and a beat come up: the stale run is reclaimed, the hook cannot be asked
    procs.worker("b", pool="solo")
    procs.beat("beat")
    procs.wait(lambda: p.status(job_id) in ("completed", "failed"), 40, "the job to end")

    # Then the API shows one unknown effect, with what a person needs to check it
    assert p.status(job_id) == "failed"
    r = api("GET", f"/api/projects/{project}/effects?status=unknown")
    assert r.status_code == 200, r.text
    (unknown,) = r.json()["items"]
    assert unknown["kind"] == "deploy_hook" and unknown["status"] == "unknown"
    assert unknown["key"] == f"approval:{first}" and unknown["approval_id"] == str(first)
    assert unknown["job_id"] == job_id and unknown["args"] == args
    assert "status_url" in unknown["error"] and unknown["resolution"] is None
    assert len(fake_providers.posts("/deploy/site")) == 1

    # And approving the same deploy again (a fresh approval of the same action), or retrying
    # the failed execution, is a 409 that names the effect; nothing reaches the hook
    second = create_approval(project, None, NewApproval("deploy_hook", "Deploy the site", args),
                             force_new=True)
    r = api("POST", f"/api/inbox/{second}/decision", {"decision": "approved", "version": 1})
    assert r.status_code == 409, r.text
    error = r.json()["error"]
    assert error["code"] == "effect_unknown" and error["details"]["effect_id"] == unknown["id"]
    assert "unknown outcome" in error["message"] and "resolve" in error["message"]
    r = api("POST", f"/api/jobs/{job_id}/retry")
    assert r.status_code == 409 and r.json()["error"]["code"] == "effect_unknown", r.text
    time.sleep(0.5)
    assert len(fake_providers.posts("/deploy/site")) == 1

    # When the founder checks with the provider and resolves it as failed
    r = api("POST", f"/api/effects/{unknown['id']}/resolve",
            {"outcome": "failed", "note": "no deploy in the hook's dashboard"})
    assert r.status_code == 200, r.text
    resolved = r.json()
    assert resolved["status"] == "failed" and resolved["resolution"]["by"] == str(owner)
    assert resolved["resolution"]["note"] == "no deploy in the hook's dashboard"
    events = pg.fetch_dicts("SELECT type, data FROM agent_job_events WHERE project_id = %s "
                            "AND data->>'effect_id' = %s", (project, unknown["id"]))
    assert [(e["type"], e["data"]["outcome"]) for e in events] == [("log", "failed")]
    # resolving twice is a 409: a known outcome is never overwritten
    r = api("POST", f"/api/effects/{unknown['id']}/resolve", {"outcome": "succeeded"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "effect_not_unknown"

    # Then the same deploy can be approved again, and it goes out once more, this time known
    fake_providers.delay = 0.0
    r = api("POST", f"/api/inbox/{second}/decision", {"decision": "approved", "version": 1})
    assert r.status_code == 200, r.text
    again = r.json()["execution_job_id"]
    procs.wait(lambda: p.status(again) in ("completed", "failed"), 30, "the second deploy")
    assert p.status(again) == "completed"
    assert [x.idempotency_key for x in fake_providers.posts("/deploy/site")] == [
        f"approval:{first}", f"approval:{second}"]
    items = api("GET", f"/api/projects/{project}/effects").json()["items"]
    assert [(e["key"], e["status"]) for e in items] == [
        (f"approval:{second}", "succeeded"), (f"approval:{first}", "failed")]
    assert api("GET", f"/api/projects/{project}/effects?status=unknown").json()["items"] == []
