"""A coding task that completes only when its pull request is merged: the agent opens the
pull request on the fake GitHub, the job waits on a merge gate, and GitHub's signed
`pull_request` webhook decides it (merged: completed; closed unmerged: failed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.services import keystore
from tests.conftest import wait_until
from tests.integration.jobdb import wait_for
from tests.integration.test_api_contract import Caller
from tests.integration.test_code_routes import SECRET, deliver
from tests.integration.test_coding_agent import TASK, alice, model, repos  # noqa: F401
from tests.support import coding_brains as brains
from tests.support.fake_anthropic import FakeAnthropic, anthropic_model, fake_anthropic  # noqa: F401
from tests.support.fake_github import FakeGithub, fake_github  # noqa: F401


def start(caller: Caller, repo: Path) -> str:
    return str(enqueue(EnqueueRequest(caller.project, "code.run_task_until_merged", {
        "repo_url": str(repo), "task": TASK, "github_repo": "acme/calculator"})).job_id)


def merge_gate(job_id: str) -> dict[str, Any]:
    found = wait_until(lambda: pg.fetch_one_dict(
        "SELECT id, status, action_args FROM approvals WHERE source_job_id = %s "
        "AND action_type = 'pr_merge'", (job_id,)), timeout=150, what="the merge gate")
    assert isinstance(found, dict)
    return found


def closed(url: str, merged: bool) -> dict[str, Any]:
    return {"action": "closed", "pull_request": {"html_url": url, "merged": merged},
            "repository": {"full_name": "acme/calculator"}}


@pytest.mark.parametrize("merged", [True, False])
def test_the_task_ends_when_github_says_its_pull_request_closed(
        alice: Caller, repos: Path, model: FakeAnthropic,  # noqa: F811
        fake_github: FakeGithub, merged: bool) -> None:  # noqa: F811
    model.script = brains.straight
    keystore.put(alice.project, "github_webhook_secret", SECRET)
    job_id = start(alice, repos / "calculator.git")
    gate = merge_gate(job_id)
    (pr,) = fake_github.pulls["acme/calculator"]
    assert gate["action_args"]["pr_url"] == pr["html_url"] and gate["status"] == "pending"
    wait_for(job_id, "waiting", timeout=30)
    # Another pull request closing decides nothing
    other = deliver(alice.client, alice.project, "pull_request",
                    closed("https://github.com/acme/calculator/pull/999", True))
    assert other.status_code == 200 and other.get_json() == {"settled": []}
    r = deliver(alice.client, alice.project, "pull_request", closed(pr["html_url"], merged))
    assert r.status_code == 200 and r.get_json() == {"settled": [str(gate["id"])]}
    job = wait_for(job_id, "completed", "failed", timeout=60)
    if merged:
        assert job["status"] == "completed", job["last_error"]
        assert job["result"]["merged"] is True and job["result"]["pr_url"] == pr["html_url"]
    else:
        assert job["status"] == "failed"
        assert "closed without being merged" in job["last_error"]
    # A redelivery finds nothing left to decide
    again = deliver(alice.client, alice.project, "pull_request", closed(pr["html_url"], merged))
    assert again.get_json() == {"settled": []}
