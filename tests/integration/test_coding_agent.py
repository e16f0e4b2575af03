"""code.run_task on a real worker, driven through the real `anthropic` SDK against a local
Messages-API server that answers with tool calls: a real repository with a failing test
is fixed, verified, pushed to a local bare remote, and a pull request is opened on a local
fake of the GitHub API."""

# ruff: noqa: F811 - the fake fixtures are imported, then requested by name

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app.web import create_app
from tasks.coding.demo import FILES, ensure_demo_repo
from tasks.engine import pg
from tasks.services.llm import reset_client
from tasks.settings import get_settings
from tests.conftest import wait_until
from tests.integration.jobdb import steps, tuples, wait_for
from tests.integration.test_api_contract import Caller, _caller
from tests.support import coding_brains as brains
from tests.support.fake_anthropic import FakeAnthropic, anthropic_model, fake_anthropic  # noqa: F401
from tests.support.fake_github import FakeGithub, fake_github  # noqa: F401
from tests.support.fake_openai import (  # noqa: F401
    FakeOpenAI,
    fake_openai,
    messages_brain,
    settings_from,
)

TASK = "Fix the failing test in the calculator"


@pytest.fixture
def repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repos"
    ensure_demo_repo(root)
    monkeypatch.setenv("SWITCHYARD_LOCAL_REPOS", str(root.resolve()))
    get_settings.cache_clear()
    return root


@pytest.fixture
def model(anthropic_model: FakeAnthropic, fake_github: FakeGithub,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    monkeypatch.setenv("SWITCHYARD_GITHUB_API_URL", fake_github.url)
    monkeypatch.setenv("SWITCHYARD_GITHUB_TOKEN", fake_github.token)
    # The operator lends its token for its own organisation's repositories only.
    monkeypatch.setenv("SWITCHYARD_SHARED_CREDENTIALS", "email,github")
    monkeypatch.setenv("SWITCHYARD_GITHUB_SHARED_REPOS", "acme/*")
    get_settings.cache_clear()
    yield anthropic_model
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def alice(db: None, worker: object) -> Caller:
    client: FlaskClient = create_app().test_client()
    return _caller(client, "alice")


def events(job_id: str, type_: str) -> list[dict]:
    return [r[0] for r in tuples("SELECT data FROM agent_job_events WHERE job_id = %s AND "
                                 "type = %s ORDER BY id", (job_id, type_))]


def remote_file(bare: Path, ref: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(bare), "show", f"{ref}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def bare_repo(repos: Path, name: str, files: dict[str, str], work: Path) -> Path:
    """repos/<name>.git holding `files` in one commit on main (built in `work`)."""
    work.mkdir()
    for path, body in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(body)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    bare = repos / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def submit(alice: Caller, repo: Path, **fields: object) -> str:
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(repo), "task": TASK, **fields})
    assert r.status_code == 202, r.get_json()
    return r.get_json()["job_id"]


def test_a_failing_test_is_fixed_verified_pushed_and_proposed(
        alice: Caller, repos: Path, model: FakeAnthropic, fake_github: FakeGithub) -> None:
    model.script = brains.straight
    bare = repos / "calculator.git"
    job_id = submit(alice, bare, github_repo="acme/calculator")

    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert result["tests_passed"] is True, (events(job_id, "tool_result"),
                                            events(job_id, "verify"))
    # Then the branch holds the fix, on the remote, proposed as a pull request
    assert result["branch"].startswith(f"switchyard/{job_id[:8]}-fix-the-failing-test")
    assert "return a + b" in remote_file(bare, result["branch"], "calculator.py")
    assert remote_file(bare, "main", "calculator.py") == FILES["calculator.py"]
    (pr,) = fake_github.pulls["acme/calculator"]
    assert result["pr_url"] == pr["html_url"]
    assert (pr["head"]["ref"], pr["base"]["ref"]) == (result["branch"], "main")
    assert "Fix add" in pr["body"] and "the checks pass" in pr["body"]
    assert (result["tests_passed"], result["iterations"], result["debug_mode"]) == (True, 1, False)
    assert result["subtasks"] == 1 and result["resumed"] is False
    assert result["tokens_in"] > 0 and result["tokens_out"] > 0
    # And every call went through the SDK with the tool contract; the model read the results
    bodies = [r.body for r in model.received]
    assert all(b.get("stream") for b in bodies)
    names = {t["name"] for b in bodies for t in b.get("tools") or []}
    assert names == {"list_files", "read_file", "write_file", "edit_file", "search", "run",
                     "finish"}
    seen = [r["content"] for b in bodies for r in brains.tool_results(b)]
    assert any("return a - b" in str(c) for c in seen)
    # And the feed tells the story: phases, each tool call and its result, the round, the diff
    phases = [(e["phase"], e["status"]) for e in events(job_id, "phase")]
    assert [p for p, s in phases if s == "completed"] == [
        "clone", "setup", "map", "explore", "plan", "build", "verify", "deliver"]
    calls = events(job_id, "tool_call")
    assert [c["name"] for c in calls] == ["list_files", "read_file", "finish", "read_file",
                                          "edit_file", "finish"]
    assert len(events(job_id, "tool_result")) == len(calls)
    baseline, verified = events(job_id, "verify")  # before any edit, then round 1
    assert baseline["baseline"] is True and baseline["passed"] is False
    assert verified["passed"] and "pytest" in verified["commands"][0]
    (diff,) = events(job_id, "diff")
    assert "+    return a + b" in diff["diff"]
    # And the one tool step that changed the checkout recorded that change alone
    changed = [s["output"] for s in steps(job_id) if s["name"].startswith("tool:")
               and s["output"].get("changed")]
    assert [("+    return a + b" in o["delta"], "patch" in o) for o in changed] == [(True, False)]
    assert events(job_id, "pull_request")[0]["url"] == pr["html_url"]
    # And the checkout is gone, the patch kept as an artifact
    assert not (get_settings().workspaces_dir / job_id).exists()
    kinds = [a["kind"] for a in alice.get(f"/api/jobs/{job_id}/artifacts").get_json()["items"]]
    assert kinds == ["patch"]


def test_a_repeated_error_switches_to_debug_mode(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    model.script = brains.stubborn
    job_id = submit(alice, repos / "calculator.git")

    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert (result["tests_passed"], result["debug_mode"], result["iterations"]) == (True, True, 3)
    assert result["pr_url"] is None  # no github_repo: pushed, not proposed
    rounds = [r for r in events(job_id, "verify") if not r.get("baseline")]
    assert [r["passed"] for r in rounds] == [False, False, True]
    (switched,) = events(job_id, "debug_mode")
    assert "assert" in switched["error"]
    # The root-cause prompt carried the error history
    debug_calls = [r.body for r in model.received if brains.phase(r.body) == "debug"]
    assert debug_calls and "add(2, 3)" in debug_calls[0]["system"]
    # The read outside the workspace was a tool error the model saw, not a crash
    (escape,) = [e for e in events(job_id, "tool_result") if e["is_error"]]
    assert "escape" in escape["content"].lower() or "outside" in escape["content"].lower()


def test_a_repository_without_tests_gets_a_self_review_marked_as_such(
        alice: Caller, repos: Path, model: FakeAnthropic, tmp_path: Path) -> None:
    bare = bare_repo(repos, "notests", {"calculator.py": FILES["calculator.py"]},
                     tmp_path / "notests")
    model.script = brains.straight
    job_id = submit(alice, bare, max_iterations=2)

    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    assert job["result"]["tests_passed"] is None
    (review,) = events(job_id, "verify")
    assert review["self_review"] is True and review["commands"] == []
    assert [brains.phase(r.body) for r in model.received].count("review") == 1


def test_a_check_whose_runner_is_not_installed_is_set_aside_not_fixed(
        alice: Caller, repos: Path, model: FakeAnthropic, tmp_path: Path) -> None:
    # The repository asks for ruff; the sandbox's python3 has none. "No module named ruff"
    # says nothing of the code: the agent must not spend its fix rounds on it
    assert subprocess.run(["/usr/bin/python3", "-m", "ruff", "--version"],
                          capture_output=True).returncode != 0, "this test needs ruff absent"
    bare = bare_repo(repos, "lintonly", {"calculator.py": FILES["calculator.py"],
                                         "ruff.toml": "line-length = 100\n"},
                     tmp_path / "lintonly")
    model.script = brains.straight
    job_id = submit(alice, bare, max_iterations=3)

    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert result["tests_passed"] is None and result["verdict"] == "self-reviewed"
    assert result["iterations"] == 1
    (missing,) = result["checks_not_run"]
    assert "ruff" in missing and "not installed" in missing
    rounds = events(job_id, "verify")
    assert rounds[-1]["self_review"] is True and "ruff" in rounds[-1]["not_run"][0]
    assert [brains.phase(r.body) for r in model.received].count("fix") == 0


def test_a_check_that_ran_at_the_baseline_cannot_be_talked_out_of_failing(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # What a check prints is the repository's, and so the agent's, to write: a pytest.py
    # planted at the root (python3 -m puts the checkout first) that says "No module named
    # pytest" must not set the failing tests aside and call the task verified
    planted = "import sys\nprint('/usr/bin/python3: No module named pytest')\nsys.exit(1)\n"

    def planter(body: dict) -> list[dict]:
        step, n = brains.phase(body), brains.turn(body)
        if step == "plan":
            return [brains.text(brains.plan_json("Make the checks quiet"))]
        if step == "explore":
            return [brains.use("finish", {"summary": "tests fail"})]
        if step == "review":
            return [brains.text("PASS")]
        return [[brains.use("write_file", {"path": "pytest.py", "content": planted})],
                [brains.use("finish", {"summary": "done"})]][min(n, 1)]

    model.script = planter
    job_id = submit(alice, repos / "calculator.git", max_iterations=2)
    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert result["tests_passed"] is False and result["verdict"] == "unverified", result
    assert result["checks_not_run"] == []


def test_a_plan_the_model_cannot_give_falls_back_to_one_subtask_with_a_warning(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    def no_plan(body: dict) -> list[dict]:
        if brains.phase(body) == "plan":
            return [brains.text('{"subtasks": []}')]
        return brains.straight(body)

    model.script = no_plan
    job_id = submit(alice, repos / "calculator.git")
    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    assert [brains.phase(r.body) for r in model.received].count("plan") == 2
    (plan,) = events(job_id, "plan")
    assert plan["fallback"] is True and len(plan["subtasks"]) == 1
    warnings = [e for e in events(job_id, "log") if e.get("level") == "warning"]
    assert warnings and warnings[0]["errors"]


def test_a_repository_outside_the_operators_directories_is_refused(
        alice: Caller, repos: Path, model: FakeAnthropic, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.git"
    subprocess.run(["git", "init", "-q", "--bare", str(outside)], check=True)
    job_id = submit(alice, outside)
    job = wait_for(job_id, "completed", "failed", timeout=60)
    assert job["status"] == "failed"
    assert "SWITCHYARD_LOCAL_REPOS" in job["last_error"] or "not under" in job["last_error"]
    assert model.count == 0


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SWITCHYARD_LLM_PROVIDER", "scripted")
    get_settings.cache_clear()
    reset_client()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()
    reset_client()


def test_switchyard_ups_demo_runs_with_no_key(alice: Caller, repos: Path, scripted: None) -> None:
    # The recorded session the scripted provider replays fixes the demo repository
    job_id = submit(alice, repos / "calculator.git")
    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert (result["tests_passed"], result["cost_usd"]) == (True, 0)
    assert "return a + b" in remote_file(repos / "calculator.git", result["branch"],
                                         "calculator.py")
    assert [c["name"] for c in events(job_id, "tool_call")][-4:] == [
        "read_file", "edit_file", "run", "finish"]


def test_a_shared_local_repositorys_branches_stay_with_their_owner(
        alice: Caller, repos: Path, scripted: None) -> None:
    # A local repository is the operator's, shared by every tenant: alice's pushed branch
    # (her code, her task) must not become bob's checkout
    job_id = submit(alice, repos / "calculator.git")
    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    branch = job["result"]["branch"]
    bob = _caller(alice.client, "bob")
    theirs = submit(bob, repos / "calculator.git", branch=branch)
    refused = wait_for(theirs, "completed", "failed", timeout=60)
    assert refused["status"] == "failed"
    assert refused["last_error"].endswith(
        f"branch {branch!r}: no job of yours made it, and in a shared local repository a "
        "branch the agent pushed is cloned only for its owner")
    assert not [s for s in steps(theirs) if s["name"] == "clone" and s["status"] == "completed"]
    # Hers stays hers: she may go on from her own branch
    again = submit(alice, repos / "calculator.git", branch=branch)
    assert wait_for(again, "completed", "failed", timeout=120)["status"] == "completed"


def test_an_mvp_is_built_verified_pushed_and_its_deploy_asked_for(
        alice: Caller, scripted: None) -> None:
    pg.execute("UPDATE projects SET settings = %s WHERE id = %s",
               ('{"deploy_hook_url": "https://deploy.example.com/hook"}', alice.project))
    r = alice.post(f"/api/projects/{alice.project}/jobs",
                   {"job_type": "code.generate_mvp",
                    "payload": {"description": "Tide tables for <kayakers>"}})
    assert r.status_code == 202, r.get_json()
    job_id = r.get_json()["job_id"]
    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert result["tests_passed"] is True
    assert result["files"] == ["index.html", "tests/test_site.py"]
    page = remote_file(Path(result["repo_url"]), result["branch"], "index.html")
    assert "<title>Tide tables for &lt;kayakers&gt;</title>" in page and "<form" in page
    # the deploy waits for a person: an approval for the project's hook, nothing sent
    assert result["deploy"]["status"] == "awaiting_approval"
    (approval,) = tuples("SELECT action_type, status, action_args FROM approvals "
                         "WHERE source_job_id = %s", (job_id,))
    assert approval[:2] == ("deploy_hook", "pending")
    assert approval[2]["payload"]["commit"] == result["commit"]
    items = alice.get(f"/api/jobs/{job_id}/artifacts").get_json()["items"]
    assert {a["kind"] for a in items} == {"patch", "manifest"}
    (memory,) = tuples("SELECT content FROM agent_memory WHERE project_id = %s AND "
                       "category = 'decision' AND key = 'mvp'", (alice.project,))
    assert result["branch"] in memory[0] and "its tests pass" in memory[0]


def test_what_the_checks_leave_behind_is_not_committed(
        alice: Caller, repos: Path, model: FakeAnthropic, tmp_path: Path) -> None:
    # the repository's own test writes a file each run: the check's trace, not the work
    leaky_test = FILES["test_calculator.py"] + "\n\nopen('coverage-report.txt', 'w').write('x')\n"
    bare = bare_repo(repos, "leaky", {**FILES, "test_calculator.py": leaky_test},
                     tmp_path / "leaky")
    model.script = brains.straight
    job_id = submit(alice, bare)
    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    listed = subprocess.run(["git", "--git-dir", str(bare), "ls-tree", "-r",
                             "--name-only", job["result"]["branch"]],
                            check=True, capture_output=True, text=True).stdout.split()
    assert "coverage-report.txt" not in listed and "calculator.py" in listed
    (diff,) = events(job_id, "diff")
    assert [f["path"] for f in diff["files"]] == ["calculator.py"]


def test_a_github_token_goes_to_github_only(alice: Caller, model: FakeAnthropic) -> None:
    from tasks.coding.git import Source
    from tasks.coding.tokens import token_for

    operator = get_settings().github_token
    assert operator
    assert token_for(alice.project, Source("https://github.com/acme/x.git", "https")) == operator
    for elsewhere in ("https://evil.example/acme/x.git", "https://github.com.evil.example/x.git"):
        assert token_for(alice.project, Source(elsewhere, "https")) is None
    assert token_for(alice.project, Source("/srv/repos/x.git", "local")) is None


def test_a_nul_byte_in_a_commands_output_is_shown_not_fatal() -> None:
    from tasks.coding import sandbox
    from tasks.coding.workspace import workspace_for

    # A checkout where checkouts live (pytest's tmp_path is closed to the sandbox user).
    root = workspace_for("nul-byte-test").root
    root.mkdir(exist_ok=True)
    ran = sandbox.run_command(root, "printf 'a\\000b'", sandbox.RunPolicy.from_settings())
    assert ran.output == "a\\0b"


def _checkout_of(job_id: str) -> list[Path]:
    root = get_settings().workspaces_dir
    return [p for p in (root / job_id, root / f"{job_id}.git") if p.exists()]


def test_a_coding_job_that_fails_leaves_no_checkout(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # Given a model that refuses every request for good (after the clone was made)
    model.fail_next(50, status=400, retry_after=None)
    job_id = submit(alice, repos / "calculator.git")

    job = wait_for(job_id, "completed", "failed", timeout=120)

    assert job["status"] == "failed"
    assert pg.fetch_value("SELECT count(*) FROM job_steps WHERE job_id = %s AND name = 'clone' "
                          "AND status = 'completed'", (job_id,)) == 1, "it had a checkout"
    wait_until(lambda: _checkout_of(job_id) == [], timeout=10, what="the checkout to go")


def test_a_coding_job_canceled_mid_run_leaves_no_checkout(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # Given a job held inside its first model call, its checkout on disk
    entered, release = threading.Event(), threading.Event()

    def held(body: dict) -> list[dict]:
        entered.set()
        release.wait(30)
        return brains.straight(body)

    model.script = held
    job_id = submit(alice, repos / "calculator.git")
    assert entered.wait(60), "the job reached the model"
    assert _checkout_of(job_id), "the clone is on disk while the job runs"

    # When it is canceled, and the call it is in returns
    assert alice.post(f"/api/jobs/{job_id}/cancel", {}).status_code == 200
    release.set()

    # Then it ends canceled at the next step boundary, and its checkout is gone
    job = wait_for(job_id, "canceled", "completed", "failed", timeout=60)
    assert job["status"] == "canceled"
    wait_until(lambda: _checkout_of(job_id) == [], timeout=10, what="the checkout to go")


@pytest.fixture
def openai_coder(fake_openai: FakeOpenAI, fake_github: FakeGithub,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The coding agent on SWITCHYARD_LLM_PROVIDER=openai (issue 27), against a local Chat
    Completions server driven by the same brains."""
    with settings_from(monkeypatch, {
            "SWITCHYARD_LLM_PROVIDER": "openai", "OPENAI_BASE_URL": fake_openai.url,
            "OPENAI_API_KEY": "sk-coder", "SWITCHYARD_LLM_MODEL": "qwen-coder",
            "SWITCHYARD_GITHUB_API_URL": fake_github.url,
            "SWITCHYARD_GITHUB_TOKEN": fake_github.token,
            "SWITCHYARD_SHARED_CREDENTIALS": "email,github",
            "SWITCHYARD_GITHUB_SHARED_REPOS": "acme/*"}):
        yield fake_openai


def test_the_coding_agent_fixes_and_proposes_on_an_openai_compatible_model(
        alice: Caller, repos: Path, openai_coder: FakeOpenAI, fake_github: FakeGithub) -> None:
    openai_coder.script = messages_brain(brains.straight)
    bare = repos / "calculator.git"
    job_id = submit(alice, bare, github_repo="acme/calculator")

    job = wait_for(job_id, "completed", "failed", timeout=120)
    assert job["status"] == "completed", job["last_error"]
    assert job["result"]["tests_passed"] is True
    assert "return a + b" in remote_file(bare, job["result"]["branch"], "calculator.py")
    assert len(fake_github.pulls["acme/calculator"]) == 1
    # Every turn went over Chat Completions with the tools as functions, the results as
    # tool messages answering the calls by id
    bodies = [r.body for r in openai_coder.received]
    assert all(b["model"] == "qwen-coder" and b.get("stream") for b in bodies)
    assert {t["function"]["name"] for b in bodies for t in b.get("tools") or []} == {
        "list_files", "read_file", "write_file", "edit_file", "search", "run", "finish"}
    answered = [m for b in bodies for m in b["messages"] if m["role"] == "tool"]
    assert answered and all(m["tool_call_id"].startswith("call_") for m in answered)
    assert tuples("SELECT DISTINCT provider, model FROM llm_usage WHERE job_id = %s",
                  (job_id,)) == [("openai", "qwen-coder")]
