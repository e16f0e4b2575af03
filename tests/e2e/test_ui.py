"""The web UI in a real browser: Debian's Chromium driven by Playwright against a real
gunicorn web process, a real Celery worker and a real beat.

Everything is done the way a person does it (typing, clicking) and checked twice: on the
page, and against the API or PostgreSQL. Every page is saved at 390 and 1440 px wide under
test-artifacts/ui/ for a person to look at.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.db import session_factory
from app.tokens import create_token
from models.db import session_scope
from tasks import pg
from tests.e2e.procs import ROOT, Proc, Procs, status, status_events
from tests.e2e.procs import wait as wait_for

try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # reported by the `browser` fixture
    sync_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package (apt-get install chromium)
ARTIFACTS = ROOT / "test-artifacts" / "ui"
WIDTHS = (1440, 390)
DESKTOP = {"width": 1440, "height": 900}
FUTURE = "2099-01-01T00:00:00+00:00"  # keeps a job queued: never dispatched


# --- processes ---------------------------------------------------------------------------------

@dataclass
class Site:
    base: str
    token: str
    owner_id: uuid.UUID
    web: Proc
    worker: Proc

    def api(self, method: str, path: str, body: Any = None) -> Any:
        r = httpx.request(method, self.base + path, json=body, timeout=10,
                          headers={"Authorization": f"Bearer {self.token}"})
        assert r.status_code < 300, (method, path, r.status_code, r.text)
        return r.json()

    def project(self, name: str) -> str:
        return self.api("POST", "/api/projects", {"name": name})["id"]

    def job(self, project: str, payload: dict[str, Any], **fields: Any) -> str:
        return self.api("POST", f"/api/projects/{project}/jobs",
                        {"job_type": "system.canary", "payload": payload, **fields})["job_id"]


@pytest.fixture
def site(procs: Procs) -> Site:
    """gunicorn (gthread, as in production), a worker (2 threads) and a beat."""
    web, base = procs.web(threads=32, env={"SWITCHYARD_SSE_KEEPALIVE_SECONDS": "2"})
    worker = procs.worker("w1", pool="threads", concurrency=2)
    procs.beat("beat")
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "ada")
    return Site(base, token, owner_id, web, worker)


@pytest.fixture
def page() -> Iterator[Page]:
    missing = ("playwright is not installed" if sync_playwright is None
               else f"{CHROMIUM} is missing (apt-get install chromium)"
               if not CHROMIUM.exists() else None)
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(missing)
        pytest.skip(missing)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM))
        context = browser.new_context(viewport=DESKTOP)
        context.set_default_timeout(20_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # Console errors too (a CSP refusal is one), but not the 4xx the tests cause on purpose.
        context.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
                   and not msg.text.startswith("Failed to load resource") else None)
        try:
            yield page
        finally:
            browser.close()
        assert not errors, f"errors in the browser console: {errors}"


# --- helpers -----------------------------------------------------------------------------------

WIDER_THAN_VIEWPORT = """() => [...document.querySelectorAll('body *')]
    .filter((el) => el.getBoundingClientRect().right > innerWidth + 0.5)
    .filter((el) => !el.closest('.table-wrap, pre, .feed, .chat'))  // these scroll on purpose
    .map((el) => `${el.tagName.toLowerCase()}#${el.id}.${[...el.classList].join('.')}`)"""


def shoot(page: Page, name: str) -> None:
    """Save the page at each width (its full length, and the first screen on a phone);
    nothing may stick out sideways."""
    page.evaluate("document.querySelector('#flash')?.replaceChildren()")  # toasts cover things
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844 if width < 800 else 900})
        page.wait_for_timeout(150)  # let the layout settle
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
        if width < 800:
            page.screenshot(path=str(ARTIFACTS / f"{name}-{width}-first-screen.png"))
        assert page.evaluate(WIDER_THAN_VIEWPORT) == [], f"{name} at {width} px"
    page.set_viewport_size(DESKTOP)


def sign_in(page: Page, site: Site) -> None:
    page.goto(site.base + "/")
    page.fill("#token", site.token)
    page.click("form button[type=submit]")
    expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()


def mark_document(page: Page) -> None:
    """A marker that survives only while no navigation or reload happens."""
    page.evaluate("window.__sameDocument = true")


def assert_same_document(page: Page) -> None:
    assert page.evaluate("window.__sameDocument === true"), "the page reloaded"


def requeued(job_id: str) -> bool:
    return {"status": "queued", "from": "failed"} in status_events(job_id)


# --- tests -------------------------------------------------------------------------------------

def test_sign_in_create_a_project_and_work_in_it_live(site: Site, page: Page) -> None:
    # Sign in: a wrong token is refused with a message, the right one opens the projects.
    page.goto(site.base + "/projects/" + str(uuid.uuid4()))
    expect(page.locator("#token")).to_be_focused()
    shoot(page, "signin")
    page.fill("#token", "sy_wrong")
    page.click("form button[type=submit]")
    expect(page.locator("#signin-error")).to_contain_text("not valid")
    page.fill("#token", site.token)
    page.press("#token", "Enter")
    expect(page.locator("#project-body .error")).to_contain_text("does not exist")  # `next`
    page.goto(site.base + "/")
    expect(page.locator("#projects .empty")).to_contain_text("No projects yet")

    # Create a project with the form.
    page.fill("#p-name", "Moonshot")
    page.fill("#p-goal", "Sell telescopes to amateur astronomers")
    page.click("#new-project button[type=submit]")
    link = page.locator("#projects a.title", has_text="Moonshot")
    expect(link).to_be_visible()
    shoot(page, "projects")
    link.click()
    expect(page.locator("#p-name")).to_have_text("Moonshot")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    mark_document(page)
    project = page.locator("#project").get_attribute("data-project-id")

    # A payload the job type refuses: the API's own message, next to the form.
    page.fill("#j-payload", "{not json")
    page.click("#submit-job button[type=submit]")
    expect(page.locator("#submit-error")).to_contain_text("not a valid JSON object")
    page.fill("#j-payload", json.dumps({"steps": 0}))
    page.click("#submit-job button[type=submit]")
    expect(page.locator("#submit-error")).to_contain_text("invalid payload for system.canary")
    expect(page.locator("#jobs .empty")).to_be_visible()

    # Submit a canary: its row's status changes live, and its job page, open in a second
    # tab, shows the steps complete one by one, with no reload anywhere.
    page.fill("#j-payload", json.dumps({"steps": 4, "step_seconds": 0.7}))
    page.click("#submit-job button[type=submit]")
    row = page.locator("#jobs tr[data-job-id]").first
    expect(row).to_be_visible()
    job_id = row.get_attribute("data-job-id")
    assert job_id and row.locator("a").inner_text() == job_id[:8]
    job_page = page.context.new_page()
    job_page.goto(f"{site.base}/jobs/{job_id}")
    mark_document(job_page)
    completed_counts = set()
    while job_page.locator("#j-status .badge").inner_text() != "completed":
        completed_counts.add(job_page.locator("#timeline li[data-status=completed]").count())
        assert status(job_id) != "failed"
        job_page.wait_for_timeout(50)
    expect(job_page.locator("#timeline li[data-status=completed]")).to_have_count(4)
    assert completed_counts & {1, 2, 3}, f"no step seen completing live: {completed_counts}"
    expect(job_page.locator("#diagnosis")).to_contain_text("completed")
    expect(job_page.locator("#result")).to_contain_text('"steps": 4')
    expect(job_page.locator("#events .ev")).not_to_have_count(0)
    assert_same_document(job_page)
    shoot(job_page, "job")
    job_page.close()
    expect(row).to_have_attribute("data-status", "completed")
    expect(row.locator(".progress")).to_have_text("step-4 completed")
    expect(page.locator("#feed .ev-step", has_text="step-4 completed")).to_be_visible()

    # Launch: the packet's actions come to the inbox, each with exactly its arguments. (The
    # offline LLM proposes a deploy when the project has a hook; there is no API for project
    # settings yet, so the test writes it.)
    pg.fetch("UPDATE projects SET settings = settings || %s::jsonb WHERE id = %s",
             (json.dumps({"deploy_hook_url": "http://127.0.0.1:9/deploy"}), project))
    page.click("#launch")
    card = page.locator("#approvals .approval[data-status=pending]").first
    expect(card).to_be_visible(timeout=30_000)
    approval_id = card.get_attribute("data-id")
    stored = {a["id"]: a for a in
              site.api("GET", f"/api/inbox?project_id={project}&status=pending")["items"]}
    approval = stored[approval_id]
    expect(card.locator("h3")).to_have_text(approval["title"])
    expect(card.locator(".action-type")).to_have_text(approval["action_type"])
    assert json.loads(card.locator("pre.json").inner_text()) == approval["action_args"]
    shoot(page, "project-inbox")

    # Approve it: the decision takes effect and the execution job is created. (It may fail
    # here: no real deploy hook or mail server is configured.)
    card.locator("button.approve").click()
    decided = page.locator(f".decided .approval[data-id='{approval_id}']")
    expect(decided).to_have_attribute("data-status", "approved")
    after = next(a for a in site.api("GET", f"/api/inbox?project_id={project}&status=all")[
        "items"] if a["id"] == approval_id)
    assert after["status"] == "approved" and after["version"] == approval["version"] + 1
    assert after["execution_job_id"], after
    assert site.api("GET", f"/api/jobs/{after['execution_job_id']}")["job_type"] == \
        "approval.execute"
    expect(page.locator(f"#jobs tr[data-job-id='{after['execution_job_id']}']")).to_be_visible()

    # Chat: the reply streams into a bubble from `delta` events, then the stored message
    # takes its place.
    page.evaluate("""() => {
        window.__streamed = [];
        new MutationObserver(() => {
            for (const b of document.querySelectorAll('#chat-log .msg.streaming .text'))
                if (b.textContent.replace('…', '').length) window.__streamed.push(b.textContent);
        }).observe(document.querySelector('#chat-log'),
                   {childList: true, subtree: true, characterData: true});
    }""")
    page.fill("#chat-input", "What should we do this week?")
    page.press("#chat-input", "Enter")
    expect(page.locator("#chat-log .msg.user").last).to_contain_text("What should we do")
    final = page.locator("#chat-log .msg.assistant[data-final=true]").last
    expect(final).to_be_visible(timeout=30_000)
    messages = site.api("GET", f"/api/projects/{project}/chat")["items"]
    reply = messages[-1]
    assert reply["role"] == "assistant" and reply["content"]
    expect(final.locator(".text")).to_have_text(reply["content"])
    streamed = page.evaluate("window.__streamed")
    assert streamed and reply["content"].startswith(streamed[0]), streamed[:3]
    expect(page.locator("#memory dl")).to_contain_text("last-conversation")
    assert_same_document(page)
    page.locator("#chat-log").evaluate("el => el.scrollTop = 0")
    shoot(page, "project")


def test_monitor_queues_workers_and_failed_jobs(site: Site, page: Page) -> None:
    project = site.project("Operations")
    sign_in(page, site)
    page.goto(site.base + "/monitor")
    # (Other tests' in-process worker may be listed and take jobs too: nothing counts on it.)
    expect(page.locator(f"#workers .worker.alive[data-pid='{site.worker.pid}']")).to_be_visible()
    expect(page.locator("#queues .empty")).to_be_visible()
    mark_document(page)

    # Queue depth rises while a dozen slow canaries wait for the worker threads, then falls.
    jobs = [site.job(project, {"steps": 2, "step_seconds": 0.6}) for _ in range(12)]
    queue = page.locator(".queue[data-queue=default]")
    expect(queue).to_be_visible()
    depths = []
    wait_for(lambda: depths.append(int(queue.get_attribute("data-depth") or 0)) or
             max(depths) >= 2, 10, "the queue depth to rise")
    shoot(page, "monitor-busy")
    expect(queue).to_have_attribute("data-depth", "0", timeout=30_000)
    wait_for(lambda: all(status(j) == "completed" for j in jobs), 30, "the canaries to finish")
    expect(queue.locator("rect.bar")).not_to_have_count(0)  # the last hour's throughput
    expect(page.locator(".stat[data-stat='running'] .value")).to_have_text("0")

    # Failed jobs: retry one, then all that match a filter.
    failing = [site.job(project, {"steps": 1, "fail_first_attempts": 5}, max_attempts=1)
               for _ in range(3)]
    wait_for(lambda: all(status(j) == "failed" for j in failing), 30, "the jobs to fail")
    page.click("#failed-filter button[type=submit]")
    rows = page.locator("#failed li[data-job-id]")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("failing on purpose")
    shoot(page, "monitor")
    first = rows.first.get_attribute("data-job-id")
    rows.first.locator("button.retry-one").focus()
    page.keyboard.press("Enter")  # keyboard reachable
    expect(page.locator("#flash")).to_contain_text(f"Job {first[:8]} queued again")
    wait_for(lambda: requeued(first), 10, "the retried job to be queued again")
    page.select_option("#f-project", project)
    page.fill("#f-type", "system.canary")
    page.click("#failed-filter button[type=submit]")
    expect(page.locator("#retry-all")).to_be_enabled()
    page.click("#retry-all")
    expect(page.locator("#flash")).to_contain_text("again")
    wait_for(lambda: all(requeued(j) for j in failing), 10, "every failed job to be requeued")

    # A canary from the button.
    page.select_option("#canary-project", project)
    page.click("#run-canary")
    expect(page.locator("#flash")).to_contain_text("Canary")
    assert_same_document(page)

    # A failed job's page: its error and the diagnosis; then cancel a scheduled job.
    wait_for(lambda: status(failing[0]) == "failed", 30, "the retried job to fail again")
    page.goto(f"{site.base}/jobs/{failing[0]}")
    expect(page.locator("#last-error")).to_contain_text("failing on purpose")
    expect(page.locator("#retry")).to_be_enabled()
    expect(page.locator("#diagnosis-card")).to_have_attribute("data-reason", "failed")
    shoot(page, "job-failed")
    later = site.job(project, {"steps": 1}, run_after=FUTURE)
    page.goto(f"{site.base}/jobs/{later}")
    expect(page.locator("#j-status .badge")).to_have_text("queued")
    page.click("#cancel")
    expect(page.locator("#j-status .badge")).to_have_text("canceled")
    assert status(later) == "canceled"
