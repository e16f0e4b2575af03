"""The coding agent's verdict (issue 24.5-24.6): the checks run once before any edit (the
baseline), so a test that already failed is reported as such and not as the agent's breakage;
an unverified change goes out as a draft pull request that says so, never as a verified one."""

# ruff: noqa: F811 - the fake fixtures are imported, then requested by name

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.jobdb import tuples, wait_for
from tests.integration.test_api_contract import Caller, _caller
from tests.integration.test_coding_agent import alice, model, repos  # noqa: F401
from tests.integration.test_coding_setup import TIMEOUT, bare_repo, fixer, run
from tests.support import coding_brains as brains
from tests.support.fake_anthropic import FakeAnthropic, anthropic_model, fake_anthropic  # noqa: F401
from tests.support.fake_github import FakeGithub, fake_github  # noqa: F401

CALC = {
    "calc.py": "def add(a, b):\n    return a * b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}


def test_a_failure_that_was_there_before_is_the_baseline_not_the_agents(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    model.script = fixer("calc.py", "a * b", "a + b")
    bare = bare_repo(repos, "legacy", {
        **CALC, "test_legacy.py": "def test_clock():\n    assert 1 == 2, 'broken since 2019'\n"})
    job = run(alice, bare)
    result = job["result"]
    assert result["baseline"] == ["test_calc::test_add", "test_legacy::test_clock"]
    assert (result["fixed"], result["broken"]) == (["test_calc::test_add"], [])
    assert result["tests_passed"] is True and result["verdict"] == "verified"
    assert result["iterations"] == 1


def test_a_change_that_breaks_a_passing_test_is_not_verified(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    model.script = fixer("calc.py", "a * b", "a + b")
    bare = bare_repo(repos, "fragile", {
        **CALC, "test_mul.py": "from calc import add\n\n\ndef test_square():\n"
                               "    assert add(2, 2) == 4\n\n\ndef test_three():\n"
                               "    assert add(3, 1) != 4\n"})
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(bare), "task": "Fix add", "max_iterations": 1})
    job = wait_for(r.get_json()["job_id"], "completed", "failed", timeout=TIMEOUT)
    result = job["result"]
    assert result["broken"] == ["test_mul::test_three"] and result["verdict"] == "unverified"
    assert result["tests_passed"] is False


def test_skipping_the_failing_test_is_not_fixing_it(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # A model told to make CI green marks the failing test skipped: pytest exits 0
    model.script = fixer("test_calc.py", "def test_add():",
                         "import pytest\n\n\n@pytest.mark.skip('flaky')\ndef test_add():")
    bare = bare_repo(repos, "skipper", {
        **CALC, "test_more.py": "def test_ok():\n    assert True\n"})
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(bare), "task": "test_add is flaky, make CI green",
                    "max_iterations": 1})
    job = wait_for(r.get_json()["job_id"], "completed", "failed", timeout=TIMEOUT)
    result = job["result"]
    assert result["fixed"] == [] and result["unproven"] == ["test_calc::test_add"]
    assert result["tests_passed"] is False and result["verdict"] == "unverified"


def test_a_wrong_fix_goes_out_as_a_draft_that_says_verification_failed(
        alice: Caller, repos: Path, model: FakeAnthropic, fake_github: FakeGithub) -> None:
    model.script = fixer("calc.py", "a * b", "a - b")  # wrong, and the same every round
    bare = bare_repo(repos, "wrong", CALC)
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(bare), "task": "Fix add", "max_iterations": 2,
                    "github_repo": "acme/wrong"})
    job = wait_for(r.get_json()["job_id"], "completed", "failed", timeout=TIMEOUT)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert (result["tests_passed"], result["verdict"], result["draft"]) == (
        False, "unverified", True)
    [pr] = fake_github.pulls["acme/wrong"]
    assert pr["draft"] is True and pr["body"].startswith("Verification failed")
    assert "test_calc::test_add" in pr["body"] and result["pr_url"] == pr["html_url"]


def test_without_drafts_an_unverified_change_opens_no_pull_request(
        alice: Caller, repos: Path, model: FakeAnthropic, fake_github: FakeGithub) -> None:
    model.script = fixer("calc.py", "a * b", "a - b")
    bare = bare_repo(repos, "nodraft", CALC)
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(bare), "task": "Fix add", "max_iterations": 1,
                    "github_repo": "acme/nodraft", "open_draft_on_failure": False})
    job = wait_for(r.get_json()["job_id"], "completed", "failed", timeout=TIMEOUT)
    assert job["result"]["pr_url"] is None and job["result"]["branch"]
    assert "acme/nodraft" not in fake_github.pulls


def test_the_trajectory_has_every_turn_call_patch_setup_and_round_in_order(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # Issue 24.7: GET /api/jobs/<jid>/trajectory
    model.script = fixer("calc.py", "a * b", "a + b")
    bare = bare_repo(repos, "traced", CALC)
    job = run(alice, bare)
    r = alice.get(f"/api/jobs/{job['id']}/trajectory")
    assert r.status_code == 200, r.get_json()
    doc = r.get_json()
    assert doc["job_type"] == "code.run_task" and doc["result"]["verdict"] == "verified"
    items = doc["items"]
    assert [i["seq"] for i in items] == sorted(i["seq"] for i in items)
    kinds = [i["kind"] for i in items]
    assert kinds.index("setup") < kinds.index("verify") < kinds.index("model")
    baseline = next(i for i in items if i["kind"] == "verify")
    assert baseline["baseline"] is True and baseline["failing"] == ["test_calc::test_add"]
    assert "pytest" in baseline["checks"][0]["command"]
    turns = [i for i in items if i["kind"] == "model"]
    assert all(t["tokens_in"] > 0 and t["tokens_out"] > 0 for t in turns)
    [edit] = [i for i in items if i["kind"] == "tool" and i["tool"] == "edit_file"]
    assert edit["input"] == {"path": "calc.py", "old": "a * b", "new": "a + b"}
    assert "+    return a + b" in edit["patch"] and edit["is_error"] is False
    last = [i for i in items if i["kind"] == "verify"][-1]
    assert (last["baseline"], last["passed"], last["fixed"]) == (
        False, True, ["test_calc::test_add"])
    # Another owner reads nothing of it
    mallory = _caller(alice.client, "mallory")
    assert mallory.get(f"/api/jobs/{job['id']}/trajectory").status_code == 404


def idler(path: str):
    """A model that reads `path` and says it is done, every time, never editing."""
    def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
        step, n = brains.phase(body), brains.turn(body)
        if step == "plan":
            return [brains.text(brains.plan_json("Fix it"))]
        if step == "review":
            return [brains.text("PASS")]
        return [[brains.use("read_file", {"path": path})],
                [brains.use("finish", {"summary": "looks fine to me"})]][min(n, 1)]
    return brain


def test_a_model_that_changes_nothing_is_not_checked_again_and_not_verified(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # Given a model that reads and finishes without an edit, round after round
    model.script = idler("calc.py")
    bare = bare_repo(repos, "idle", CALC)
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(bare), "task": "Fix add", "max_iterations": 5})
    job = wait_for(r.get_json()["job_id"], "completed", "failed", timeout=TIMEOUT)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    # Then its verdict says nothing changed, no branch is pushed
    assert (result["verdict"], result["branch"], result["tests_passed"]) == (
        "unchanged", None, False)
    # And an unchanged tree's checks ran once: no round re-ran them on the same files, and
    # the loop stopped after two fix rounds that changed nothing, not after five
    checked = [name for (name,) in tuples(
        "SELECT name FROM job_steps WHERE job_id = %s AND name LIKE 'verify:%%' ORDER BY seq",
        (job["id"],))]
    assert checked == ["verify:baseline", "verify:1"], checked
    assert result["iterations"] == 3, result
    said = [m for (m,) in tuples("SELECT message FROM agent_job_events WHERE job_id = %s "
                                 "AND type = 'verify' ORDER BY id", (job["id"],))]
    assert any("nothing changed" in m for m in said), said


def test_a_task_that_needs_no_change_says_so_rather_than_verified(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # Given a repository whose tests already pass, and a model that finds nothing to do
    model.script = idler("calc.py")
    bare = bare_repo(repos, "fine", {**CALC, "calc.py": "def add(a, b):\n    return a + b\n"})
    job = run(alice, bare, "Make sure add works")
    result = job["result"]
    # Then the job does not claim to have verified a change it did not make
    assert (result["verdict"], result["branch"], result["tests_passed"]) == (
        "unchanged", None, True)
