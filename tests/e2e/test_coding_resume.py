"""A coding job whose worker is killed with SIGKILL in the middle of its build resumes on
another worker at the step it was in: the clone is not repeated, no completed tool call or
model call runs again, and the checkout is rebuilt from the clone plus the recorded patch
(its directory is deleted here, as on another machine)."""

# ruff: noqa: F811 - the fake fixture is imported, then requested by name

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tasks.coding.demo import DEMO_TASK, ensure_demo_repo
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.settings import get_settings
from tests.e2e import procs as p
from tests.integration.jobdb import tuples
from tests.support import coding_brains as brains
from tests.support.fake_anthropic import FakeAnthropic, fake_anthropic  # noqa: F401

pytestmark = pytest.mark.e2e


def slow_build(body: dict) -> list[dict]:
    """Like `straight`, but its build runs the tests behind a pause after the fix."""
    if brains.phase(body) != "build":
        return brains.straight(body)
    script = [[brains.use("read_file", {"path": "calculator.py"})],
              [brains.use("edit_file", brains.FIX)],
              [brains.use("run", {"command": "sleep 8; python3 -m pytest -q",
                                  "timeout_seconds": 60})],
              [brains.use("finish", {"summary": "add adds."})]]
    return script[min(brains.turn(body), 3)]


def step_seqs(job_id: str) -> dict[str, int]:
    return dict(tuples("SELECT name, seq FROM job_steps WHERE job_id = %s", (job_id,)))


def test_kill9_mid_build_resumes_where_it_was(procs: p.Procs, project: str, tmp_path: Path,
                                              fake_anthropic: FakeAnthropic) -> None:
    repos = tmp_path / "repos"
    bare = ensure_demo_repo(repos)
    fake_anthropic.script = slow_build
    env = {"SWITCHYARD_LLM_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": fake_anthropic.url,
           "ANTHROPIC_API_KEY": "test-key", "SWITCHYARD_LLM_MODEL": "claude-test-1",
           "SWITCHYARD_LOCAL_REPOS": str(repos.resolve())}
    a = procs.worker("a", pool="solo", env=env)
    job_id = str(enqueue(EnqueueRequest(project_id=project, job_type="code.run_task",
                                        payload={"repo_url": str(bare), "task": DEMO_TASK})
                         ).job_id)

    # Given worker A inside the build's `run` call, the fix already made and recorded
    def running_tests() -> bool:
        return bool(tuples("SELECT 1 FROM agent_job_events WHERE job_id = %s AND "
                           "type = 'tool_call' AND data->>'name' = 'run'", (job_id,)))

    procs.wait(running_tests, 90, "the build's run call")
    a.kill9()
    shutil.rmtree(get_settings().workspaces_dir / job_id, ignore_errors=True)
    asked_before = len(fake_anthropic.received)

    # When worker B and a beat come up
    procs.worker("b", pool="solo", env=env)
    procs.beat("beat")
    procs.wait(lambda: p.status(job_id) in ("completed", "failed"), 120, "the job ended")

    # Then it completed from where it was, with the fix made before the kill
    final = p.job(job_id)
    assert final["status"] == "completed", final["last_error"]
    result = final["result"]
    assert result["resumed"] is True and result["tests_passed"] is True
    fixed = subprocess.run(["git", "--git-dir", str(bare), "show",
                            f"{result['branch']}:calculator.py"],
                           check=True, capture_output=True, text=True).stdout
    assert "return a + b" in fixed
    # And the clone and every tool call completed before the kill ran once
    seqs, started = step_seqs(job_id), p.started_counts(job_id)
    assert started[seqs["clone"]] == 1
    assert started[seqs["tool:build:1:1:1"]] == 1 and started[seqs["tool:build:1:2:1"]] == 1
    assert started[seqs["tool:build:1:3:1"]] == 2  # the call it was in, run again
    # And the model was asked nothing twice: B went on with the next answer
    asked = Counter((brains.phase(r.body), brains.turn(r.body))
                    for r in fake_anthropic.received)
    assert max(asked.values()) == 1, asked
    assert len(fake_anthropic.received) > asked_before
