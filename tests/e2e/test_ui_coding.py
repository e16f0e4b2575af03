"""The coding agent's pages in a real browser (Debian's Chromium, through Playwright) against a
real gunicorn web process: a code.* job's Coding panel, built from events written straight
into PostgreSQL in the shape the worker writes them (phase, plan, tool_call, tool_result,
verify, debug_mode, diff, pull_request), live and again from history after a reload; and the
project page's Code task form.
"""

# ruff: noqa: F811 - the `page` fixture is imported from test_ui, then requested by name

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tasks.services import keystore
from tests.e2e.procs import Procs
from tests.e2e.test_ui import (  # noqa: F401 - `page` is a fixture, used by name
    Site,
    assert_same_document,
    mark_document,
    open_section,
    page,
    shoot,
    sign_in,
)

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the `page` fixture reports it
    Page = Any  # type: ignore[misc,assignment]

pytestmark = pytest.mark.e2e


@pytest.fixture
def web_site(procs: Procs) -> Site:
    """A web process alone: no worker takes the jobs, no beat reclaims the ones the test
    marks running; what the page shows is what the test writes."""
    web, base = procs.web(threads=16, env={"SWITCHYARD_SSE_KEEPALIVE_SECONDS": "1"})
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "linus")
    return Site(base, token, owner_id, web, None)


def running_job(project: str, job_type: str = "code.run_task") -> str:
    job_id = str(uuid.uuid4())
    payload = {"repo_url": "https://github.com/octo/widgets.git", "task": "Add a /health route"}
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, status, queue, payload, "
               "idempotency_key, attempts, max_attempts, started_at) VALUES (%s, %s, %s, "
               "'running', 'agents', %s::jsonb, %s, 1, 5, now())",
               (job_id, project, job_type, json.dumps(payload), f"test:{job_id}"))
    return job_id


def emit(job_id: str, project: str, type_: str, data: dict[str, Any]) -> None:
    """One event as the engine stores it (tasks.engine.context.JobContext.emit)."""
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "VALUES (%s, %s, %s, %s, %s::jsonb)",
               (job_id, project, type_, f"{type_} {data.get('phase') or data.get('name') or ''}",
                json.dumps(data)))


def finish(job_id: str, project: str, result: dict[str, Any]) -> None:
    pg.execute("UPDATE agent_jobs SET status = 'completed', completed_at = now(), "
               "result = %s::jsonb WHERE id = %s", (json.dumps(result), job_id))
    emit(job_id, project, "status", {"status": "completed", "from": "running"})


def phase(job_id: str, project: str, name: str, status: str, detail: str | None = None) -> None:
    emit(job_id, project, "phase", {"phase": name, "status": status,
                                    **({"detail": detail} if detail else {})})


def tool(job_id: str, project: str, call_id: str, name: str, tool_input: dict[str, Any],
         content: str, *, is_error: bool = False, subtask: int | None = None,
         turn: int = 1) -> None:
    emit(job_id, project, "tool_call", {"call_id": call_id, "name": name, "input": tool_input,
                                        "subtask": subtask, "turn": turn})
    emit(job_id, project, "tool_result", {"call_id": call_id, "name": name,
                                          "is_error": is_error, "content": content})


DIFF = """diff --git a/app.py b/app.py
index 3b18e51..a9c2f4d 100644
--- a/app.py
+++ b/app.py
@@ -1,3 +1,7 @@
 from flask import Flask
-app = Flask("widgets")
+app = Flask(__name__)
+
+@app.get("/health")
+def health():
+    return {"ok": True}
 # routes below
diff --git a/tests/test_health.py b/tests/test_health.py
new file mode 100644
--- /dev/null
+++ b/tests/test_health.py
@@ -0,0 +1,3 @@
+def test_ok(client):
+    assert client.get("/health").status_code == 200
+    assert client.get("/health").json == {"ok": True}
"""
RESULT = {"branch": "switchyard/3f2a-add-health",
          "commit": "a9c2f4d1e0b7c3a2f1e0d9c8b7a6f5e4d3c2b1a0",
          "pr_url": "https://github.com/octo/widgets/pull/42", "iterations": 3,
          "tests_passed": True, "subtasks": 2, "debug_mode": True, "resumed": False,
          "tokens_in": 48210, "tokens_out": 6120, "cost_usd": 0.0421}


def check_finished_panel(page: Page) -> None:
    """What a finished run shows, live or after a reload."""
    panel = page.locator("#coding")
    expect(panel.locator(".phase[data-state=done]")).to_have_count(7)
    rounds = panel.locator("#coding-verify .verify-round")
    expect(rounds).to_have_count(3)
    assert rounds.evaluate_all("els => els.map((e) => [e.dataset.round, e.dataset.passed, "
                               "e.dataset.selfReview])") == [
        ["1", "false", "false"], ["2", "true", "false"], ["3", "true", "true"]]
    expect(rounds.nth(0).locator(".badge")).to_have_text("failed")
    expect(rounds.nth(2).locator(".badge.self-review")).to_have_text("self-review")
    expect(rounds.nth(0).locator("code")).to_have_text("pytest -q")
    expect(rounds.nth(0).locator("details")).not_to_have_attribute("open", "")
    expect(panel.locator("#coding-verify .debug-switch pre")).to_have_text(
        "AssertionError: expected 200, got 404")
    expect(panel.locator("#coding-debug")).to_have_text("debug mode")
    expect(panel.locator("#coding-calls .tool-call")).to_have_count(5)
    # the diff: its files with their counts, each line coloured by kind
    expect(panel.locator(".diff-files li")).to_have_count(2)
    expect(panel.locator(".diff-files li[data-path='app.py']")).to_contain_text(
        "+5 \N{MINUS SIGN}1")
    expect(panel.locator("pre.diff .dl.add")).to_have_count(8)
    expect(panel.locator("pre.diff .dl.del")).to_have_count(1)
    expect(panel.locator("pre.diff .dl.del")).to_have_text('-app = Flask("widgets")')
    colours = page.evaluate("""() => Object.fromEntries(['add', 'del', 'ctx'].map((k) =>
        [k, getComputedStyle(document.querySelector('pre.diff .dl.' + k)).backgroundColor]))""")
    assert len(set(colours.values())) == 3, colours
    # the pull request, and the cost from the result
    link = panel.locator("a.pr-link")
    expect(link).to_have_attribute("href", "https://github.com/octo/widgets/pull/42")
    expect(link).to_contain_text("Pull request #42")
    expect(panel.locator(".facts .tokens-in dd")).to_have_text("48210")
    expect(panel.locator(".facts .tokens-out dd")).to_have_text("6120")
    expect(panel.locator(".facts .cost dd")).to_have_text("$0.0421")


def test_a_coding_job_shows_its_phases_calls_rounds_diff_pull_request_and_cost_live_and_on_reload(
        web_site: Site, page: Page) -> None:
    site = web_site
    project = site.project("Widgets")
    job = running_job(project)

    # Given a run that has cloned, mapped, explored, planned and is building, its last command
    # failing
    phase(job, project, "clone", "started")
    phase(job, project, "clone", "completed", "main at 3b18e51")
    phase(job, project, "map", "started")
    phase(job, project, "map", "completed", "212 files, 1 804 definitions")
    phase(job, project, "explore", "started")
    tool(job, project, "c1", "list_files", {"path": "."}, "app.py\ntests/\nREADME.md", turn=1)
    tool(job, project, "c2", "read_file", {"path": "app.py"}, 'from flask import Flask\n', turn=2)
    phase(job, project, "explore", "completed")
    phase(job, project, "plan", "started")
    emit(job, project, "plan", {"fallback": False, "subtasks": [
        {"title": "Add a /health route", "description": "Return {ok: true} from GET /health."},
        {"title": "Test it", "description": "A test that calls the route."}]})
    phase(job, project, "plan", "completed")
    phase(job, project, "build", "started", "subtask 1 of 2")
    tool(job, project, "c3", "write_file", {"path": "app.py", "content": "from flask import …"},
         "wrote 9 lines to app.py", subtask=0, turn=3)
    tool(job, project, "c4", "run", {"command": "pytest -q tests/test_health.py"},
         "FAILED tests/test_health.py::test_ok - AssertionError\n1 failed in 0.12s",
         is_error=True, subtask=0, turn=4)

    # When its page opens
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{job}")
    panel = page.locator("#coding")
    expect(panel).to_be_visible()
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    mark_document(page)

    # Then it shows the phases done and the one running
    states = {p: panel.locator(f".phase[data-phase={p}]") for p in
              ("clone", "map", "explore", "plan", "build", "verify", "deliver")}
    for name in ("clone", "map", "explore", "plan"):
        expect(states[name]).to_have_attribute("data-state", "done")
    expect(states["build"]).to_have_attribute("data-state", "running")
    expect(states["build"]).to_have_attribute("aria-current", "step")
    expect(states["build"]).to_contain_text("subtask 1 of 2")
    expect(states["verify"]).to_have_attribute("data-state", "pending")
    expect(states["map"]).to_contain_text("212 files")
    # the plan, its first subtask the current one
    subtasks = panel.locator("#coding-plan .subtasks li")
    expect(subtasks).to_have_count(2)
    expect(subtasks.nth(0)).to_have_attribute("aria-current", "step")
    expect(subtasks.nth(1)).to_contain_text("A test that calls the route.")
    # each tool call collapsed with its input summary; the failed one highlighted
    calls = panel.locator("#coding-calls .tool-call")
    expect(calls).to_have_count(4)
    assert calls.evaluate_all("els => els.map((e) => e.dataset.callId)") == ["c1", "c2", "c3", "c4"]
    failed = panel.locator(".tool-call[data-call-id=c4]")
    expect(failed).to_have_attribute("data-state", "error")
    expect(failed.locator("summary .tool-input")).to_have_text("$ pytest -q tests/test_health.py")
    expect(failed.locator("summary")).to_contain_text("subtask 1 · turn 4")
    expect(failed.locator("pre.output")).to_have_count(0)  # collapsed: not even built
    expect(panel.locator("#coding-calls-count")).to_have_text("(4, 1 failed)")
    failed.locator("summary").click()
    expect(failed.locator("pre.output.is-error")).to_contain_text("1 failed in 0.12s")
    read = panel.locator(".tool-call[data-call-id=c2]")
    expect(read).to_have_attribute("data-state", "ok")
    read.locator("summary").focus()
    page.keyboard.press("Enter")  # keyboard reachable
    expect(read.locator(".tool-args dd")).to_have_text("app.py")
    expect(read.locator("pre.output")).to_have_text("from flask import Flask\n")
    expect(panel.locator("#coding-debug")).to_have_count(0)
    shoot(page, "job-coding-running")

    # When the rest of the run streams in: a failed round, debug mode, a fix, two passing
    # rounds (the second the agent's self-review), the diff, the pull request, the result
    phase(job, project, "build", "completed")
    phase(job, project, "verify", "started")
    emit(job, project, "verify", {"round": 1, "commands": ["pytest -q"], "passed": False,
                                  "output": "E   AssertionError: expected 200, got 404",
                                  "self_review": False})
    emit(job, project, "debug_mode", {"error": "AssertionError: expected 200, got 404"})
    expect(panel.locator("#coding-debug")).to_be_visible()
    tool(job, project, "c5", "edit_file", {"path": "app.py", "old": "Flask(\"widgets\")",
                                           "new": "Flask(__name__)"},
         "edited app.py", subtask=1, turn=5)
    expect(subtasks.nth(1)).to_have_attribute("aria-current", "step")
    emit(job, project, "verify", {"round": 2, "commands": ["pytest -q"], "passed": True,
                                  "output": "2 passed in 0.10s", "self_review": False})
    emit(job, project, "verify", {"round": 3, "commands": [], "passed": True,
                                  "output": "The change does what the task asks.",
                                  "self_review": True})
    phase(job, project, "verify", "completed")
    phase(job, project, "deliver", "started")
    emit(job, project, "diff", {"diff": DIFF, "truncated": False, "files": [
        {"path": "app.py", "added": 5, "removed": 1},
        {"path": "tests/test_health.py", "added": 3, "removed": 0}]})
    emit(job, project, "pull_request", {"url": "https://github.com/octo/widgets/pull/42",
                                        "number": 42, "branch": RESULT["branch"]})
    phase(job, project, "deliver", "completed", "pull request #42")
    finish(job, project, RESULT)

    # Then the page follows without a reload, to the cost in the result
    expect(page.locator("#j-status .badge")).to_have_text("completed")
    check_finished_panel(page)
    expect(subtasks.nth(1)).not_to_have_attribute("aria-current", "step")  # none once it ended
    panel.locator("#coding-verify .verify-round").nth(0).locator("summary").click()
    expect(panel.locator("#coding-verify .verify-round pre.output").first).to_have_text(
        "E   AssertionError: expected 200, got 404")
    assert_same_document(page)
    shoot(page, "job-coding")

    # And a reload builds the same panel from the history alone
    page.reload()
    expect(page.locator("#j-status .badge")).to_have_text("completed")
    check_finished_panel(page)
    expect(panel.locator(".tool-call[data-call-id=c4]")).to_have_attribute("data-state", "error")


def test_model_text_with_markup_is_shown_as_text_never_run(web_site: Site, page: Page) -> None:
    site = web_site
    project = site.project("Hostile")
    job = running_job(project, job_type="code.generate_mvp")
    script = "<script>window.__pwned = 1</script>"
    image = '<img src="/nope" onerror="window.__pwned = 2">'
    # Given a run whose every model-written field carries markup
    phase(job, project, "plan", "started", f"{image}planning")
    emit(job, project, "plan", {"fallback": True, "subtasks": [
        {"title": f"<em>loud</em>{script}", "description": image}]})
    tool(job, project, "x1", "run", {"command": f"echo '{script}'"},
         f"{script}<b>bold</b>{image}", subtask=0)
    emit(job, project, "verify", {"round": 1, "commands": [image], "passed": False,
                                  "output": script, "self_review": False})
    emit(job, project, "debug_mode", {"error": image})
    emit(job, project, "diff", {"diff": f"diff --git a/x.html b/x.html\n--- a/x.html\n"
                                        f"+++ b/x.html\n@@ -1 +1 @@\n-{image}\n+{script}\n",
                                "truncated": True,
                                "files": [{"path": f"x{image}.html", "added": 1, "removed": 1}]})
    emit(job, project, "pull_request", {"url": "javascript:window.__pwned=3", "number": 7,
                                        "branch": script})

    # When its page is open and the call unfolded
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{job}")
    panel = page.locator("#coding")
    call = panel.locator(".tool-call[data-call-id=x1]")
    call.locator("summary").click()
    for d in panel.locator("details").all():
        d.evaluate("d => d.open = true")
    expect(call.locator("pre.output")).to_have_text(f"{script}<b>bold</b>{image}")

    # Then every piece of it reads as the text it is, and none of it ran or became an element
    expect(panel.locator("#coding-plan .subtasks li strong")).to_have_text(f"<em>loud</em>{script}")
    expect(call.locator("summary .tool-input")).to_have_text(f"$ echo '{script}'")
    expect(panel.locator(".verify-round code")).to_have_text(image)
    expect(panel.locator(".verify-round pre.output")).to_have_text(script)
    expect(panel.locator(".debug-switch pre")).to_have_text(image)
    expect(panel.locator("pre.diff .dl.add")).to_have_text(f"+{script}")
    expect(panel.locator(".diff-truncated")).to_be_visible()
    expect(panel.locator(".phase[data-phase=plan] .phase-detail")).to_have_text(f"{image}planning")
    assert panel.locator("script, img, em, b").count() == 0
    expect(panel.locator("a.pr-link")).to_have_count(0)  # not an http(s) URL: no link
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None


def test_the_code_task_form_shows_the_apis_refusal_then_starts_a_job_and_links_to_it(
        web_site: Site, page: Page) -> None:
    site = web_site
    project = site.project("Widgets")
    sign_in(page, site)
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url.split(site.base)[-1])
            if r.method == "POST" and "/api/" in r.url else None)
    page.goto(f"{site.base}/projects/{project}")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    open_section(page, "code")
    mark_document(page)

    # When a task is sent with a GitHub repository the API refuses
    page.fill("#ct-repo", "https://github.com/octo/widgets.git")
    page.fill("#ct-task", "Add a /health route that answers {\"ok\": true}")
    page.fill("#ct-github", "not a repository")
    page.fill("#ct-iterations", "3")
    page.click("#code-task button[type=submit]")

    # Then the API's message shows, and the field it names is marked
    expect(page.locator("#code-task-error")).to_contain_text("github_repo")
    expect(page.locator("#ct-github-error")).to_have_text(
        "Write it as owner/name, like octo/widgets.")
    expect(page.locator("#ct-github")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#ct-github")).to_be_focused()
    expect(page.locator("#ct-repo")).not_to_have_attribute("aria-invalid", "true")
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE project_id = %s",
                          (project,)) == 0
    shoot(page, "project-code-task-refused")

    # When it is corrected and sent again (the project has its own GitHub token by then: a
    # task asking for a pull request needs one)
    keystore.put(project, "github_token", "ghp-ui-0123456789abcdef")
    page.fill("#ct-github", "octo/widgets")
    page.fill("#ct-branch", "main")
    page.click("#code-task button[type=submit]")

    # Then the errors go, the job is linked and listed, and its page is the coding job's
    done = page.locator("#code-task-done a.job-link")
    expect(done).to_be_visible()
    expect(page.locator("#code-task-error")).to_be_hidden()
    expect(page.locator("#ct-github")).not_to_have_attribute("aria-invalid", "true")
    job_id = done.get_attribute("href").rsplit("/", 1)[-1]
    task = page.locator(f"#code-tasks li[data-job-id='{job_id}']")  # the section's own list
    expect(task.locator(".task")).to_have_text("Add a /health route that answers {\"ok\": true}")
    open_section(page, "jobs")
    expect(page.locator(f"#jobs tr[data-job-id='{job_id}']")).to_be_visible()
    assert_same_document(page)
    stored = site.api("GET", f"/api/jobs/{job_id}")
    assert stored["job_type"] == "code.run_task"
    assert stored["payload"] == {"repo_url": "https://github.com/octo/widgets.git",
                                 "task": "Add a /health route that answers {\"ok\": true}",
                                 "branch": "main", "github_repo": "octo/widgets",
                                 "max_iterations": 3, "open_draft_on_failure": True}
    # The form posts to the code-tasks route; where this branch has none yet (it lands in its
    # own change), the page sends the same payload through the generic jobs API.
    assert posted[0] == f"/api/projects/{project}/code-tasks", posted
    page.go_back()  # to the Code section, where the form's link is
    done.click()
    expect(page.locator("#j-type")).to_have_text("code.run_task")
    expect(page.locator("#coding")).to_be_visible()
    expect(page.locator("#coding .phase[data-state=pending]")).to_have_count(8)
    expect(page.locator("#coding-plan")).to_contain_text("No plan yet.")


def test_the_panel_shows_when_its_module_loads_after_the_page_has_its_job(
        web_site: Site, page: Page) -> None:
    # Given a coding job, and a browser that gets the panel's imports late: job.js (which
    # tells the page's modules the job once) has run and fetched it before the panel's
    # module runs
    site = web_site
    project = site.project("Slow network")
    job = running_job(project)
    phase(job, project, "clone", "started")
    sign_in(page, site)

    def late(route: Any) -> None:
        page.wait_for_timeout(1500)
        route.continue_()

    page.route("**/diff_view.js", late)
    page.goto(f"{site.base}/jobs/{job}")

    # Then the panel still shows, from the job's history
    expect(page.locator("#j-status .badge")).to_have_text("running")
    expect(page.locator("#coding .phase[data-phase=clone]")).to_have_attribute(
        "data-state", "running")


def test_an_unverified_change_is_red_on_the_page_with_its_baseline_and_draft(
        web_site: Site, page: Page) -> None:
    # Issue 24: "the job page shows the verdict in green or red, never as plain completed".
    site = web_site
    project = site.project("Verdicts")
    job = running_job(project)
    emit(job, project, "verify", {"round": 0, "baseline": True, "commands": ["python3 -m pytest"],
                                  "passed": False, "output": "1 failed", "self_review": False})
    finish(job, project, {"branch": "switchyard/x-fix", "commit": "a" * 40, "pr_url":
                          "https://github.com/acme/wrong/pull/1", "draft": True,
                          "tests_passed": False, "verdict": "unverified", "iterations": 2,
                          "baseline": ["test_calc::test_add"], "fixed": [],
                          "broken": ["test_mul::test_three"],
                          "setup": {"status": "reused", "kinds": ["python"], "seconds": 0.01}})
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{job}")
    header = page.locator("#j-status .badge")
    expect(header).to_have_text("completed: unverified")
    expect(header).to_have_class("badge s-failed")
    verdict = page.locator("#coding-verdict")
    expect(verdict).to_contain_text("unverified")
    expect(verdict).to_have_class("badge s-failed")
    expect(page.locator("#coding-badges")).to_contain_text("draft pull request")
    expect(page.locator("#coding-outcome .baseline")).to_contain_text("test_calc::test_add")
    expect(page.locator("#coding-outcome .broken")).to_contain_text("test_mul::test_three")
    expect(page.locator("#coding-verify")).to_contain_text("Baseline (before any edit)")


def test_the_trajectory_opens_as_a_timeline_and_downloads_as_json(
        web_site: Site, page: Page) -> None:
    site = web_site
    project = site.project("Trajectories")
    job = running_job(project)
    steps = [
        ("setup", {"status": "installed", "kinds": ["python"], "seconds": 2.5,
                   "output": "Installed inflection"}),
        ("llm:build:1:1", {"text": "The operator is wrong.", "tool_calls": [
            {"id": "t1", "name": "edit_file", "input": {"path": "calc.py", "old": "a * b",
                                                        "new": "a + b"}}],
            "usage": {"input_tokens": 120, "output_tokens": 30}, "model": "m",
            "provider": "p", "stop_reason": "tool_use", "cost_usd": 0.001}),
        ("tool:build:1:1:1", {"content": "edited calc.py", "is_error": False, "changed": True,
                              "delta": "-    return a * b\n+    return a + b\n"}),
        ("verify:1", {"ran": True, "passed": True, "fixed": ["test_calc::test_add"],
                      "broken": [], "failing": [], "results": [
                          {"name": "pytest", "command": "python3 -m pytest", "exit_code": 0,
                           "passed": True, "output": "1 passed"}]}),
    ]
    for seq, (name, output) in enumerate(steps, start=1):
        pg.execute("INSERT INTO job_steps (job_id, seq, name, status, output, finished_at) "
                   "VALUES (%s, %s, %s, 'completed', %s::jsonb, now())",
                   (job, seq, name, json.dumps(output)))
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{job}")
    link = page.locator("#coding-trajectory-download")
    expect(link).to_have_attribute("href", f"/api/jobs/{job}/trajectory")
    page.locator("#coding-trajectory summary").first.click()
    items = page.locator("#coding-trajectory-list > li")
    expect(items).to_have_count(4)
    expect(items.nth(0)).to_contain_text("installed (python)")
    expect(items.nth(1)).to_contain_text("The operator is wrong.")
    expect(items.nth(1)).to_contain_text("120 tokens in, 30 out")
    expect(items.nth(2)).to_contain_text("edit_file")
    items.nth(2).locator("summary", has_text="Patch").click()
    expect(items.nth(2)).to_contain_text("+    return a + b")
    with page.expect_download() as got:
        link.click()
    doc = json.loads(Path(got.value.path()).read_text())
    assert [i["kind"] for i in doc["items"]] == ["setup", "model", "tool", "verify"]
