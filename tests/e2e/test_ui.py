"""The web UI in a real browser: Debian's Chromium driven by Playwright against a real
gunicorn web process, a real Celery worker and a real beat.

Everything is done the way a person does it (typing, clicking) and checked twice: on the
page, and against the API or PostgreSQL. Every page is saved at 390 and 1440 px wide under
test-artifacts/ui/ for a person to look at.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tests.e2e.procs import ROOT, Proc, Procs, status, status_events
from tests.e2e.procs import wait as wait_for
from tests.integration.jobdb import tuples

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
    worker: Proc | None

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
    # The scripted model types at a person's pace: its reply reaches the page as deltas
    # before the stored message, however busy the machine (at full speed both can arrive in
    # one read and the bubble is never seen streaming).
    worker = procs.worker("w1", pool="threads", concurrency=2,
                          env={"SWITCHYARD_SCRIPTED_STREAM_SECONDS": "0.3"})
    procs.beat("beat")
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "ada")
    return Site(base, token, owner_id, web, worker)


@pytest.fixture
def short_streams_site(procs: Procs) -> Site:
    """A web process whose streams end every 2 s, so the browser reconnects again and again;
    no worker: what the page shows is written straight into PostgreSQL."""
    web, base = procs.web(threads=16, env={"SWITCHYARD_SSE_KEEPALIVE_SECONDS": "1",
                                           "SWITCHYARD_STREAM_MAX_SECONDS": "2"})
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "grace")
    return Site(base, token, owner_id, web, None)


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


def sign_in(page: Page, site: Site, token: str | None = None) -> None:
    page.goto(site.base + "/")
    page.fill("#token", token or site.token)
    page.click("form button[type=submit]")
    expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
    # ... and its list has loaded (its GET answered): a test that counts requests from here on
    # must not see that one late (a CI run once did)
    expect(page.locator("#projects")).not_to_have_attribute("aria-busy", "true")


def open_section(page: Page, name: str) -> None:
    """Open a section of the project page from its bar, as a person does: the section shows
    and has the focus, the bar marks it, and the address names it (so it can be linked to)."""
    page.click(f"#sections a[data-section='{name}']")
    expect(page.locator(f"#section-{name}")).to_be_visible()
    expect(page.locator(f"#section-{name}")).to_be_focused()  # a screen reader follows
    expect(page.locator(f"#sections a[data-section='{name}']")).to_have_attribute(
        "aria-current", "page")
    assert page.url.endswith(f"#{name}"), page.url


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
    expect(page.locator("#project-body .error", has_text="does not exist")).to_be_visible()
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
    expect(page.locator("#section-overview")).to_be_visible()  # where a project opens
    open_section(page, "jobs")

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
    open_section(page, "overview")
    # the last step's outcome rides on the job's `completed` event
    expect(page.locator("#feed .ev-status[data-status=completed]",
                        has_text="step-4 completed")).to_be_visible()

    # Launch: the packet's actions come to the inbox, each with exactly its arguments. (The
    # offline LLM proposes a deploy when the project has a hook; there is no API for project
    # settings yet, so the test writes it.)
    pg.execute("UPDATE projects SET settings = settings || %s::jsonb WHERE id = %s",
               (json.dumps({"deploy_hook_url": "http://127.0.0.1:9/deploy"}), project))
    page.click("#launch")
    # an effect's approval (the packet's last, the phase advance, runs no effect)
    card = page.locator("#approvals .approval[data-status=pending]", has=page.locator(
        ".action-type", has_text=re.compile(r"^(email|deploy_hook)$"))).first
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
    open_section(page, "jobs")
    expect(page.locator(f"#jobs tr[data-job-id='{after['execution_job_id']}']")).to_be_visible()
    page.go_back()  # the sections are in the history: Back returns to the overview
    expect(page.locator("#section-overview")).to_be_visible()
    expect(page.locator("#section-jobs")).to_be_hidden()

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
    messages = site.api("GET", f"/api/projects/{project}/chat")["items"]  # newest first
    reply = messages[0]
    assert reply["role"] == "assistant" and reply["content"]
    expect(final.locator(".text")).to_have_text(reply["content"])
    streamed = page.evaluate("window.__streamed")
    assert streamed and reply["content"].startswith(streamed[0]), streamed[:3]
    page.locator("#chat-log").evaluate("el => el.scrollTop = 0")
    shoot(page, "project")
    open_section(page, "memory")
    expect(page.locator("#memory dl")).to_contain_text("last-conversation")
    assert_same_document(page)


def test_monitor_queues_workers_and_failed_jobs(site: Site, page: Page) -> None:
    project = site.project("Operations")
    # An admin token sees the fleet: every worker, this idle one too.
    with session_scope(session_factory()) as s:
        _, admin = create_token(s, "operator", admin=True)
    sign_in(page, site, admin)
    page.goto(site.base + "/monitor")
    expect(page.locator("#monitor")).to_have_attribute("data-scope", "fleet")
    # (Other tests' in-process worker may be listed and take jobs too: nothing counts on it.)
    assert site.worker is not None
    expect(page.locator(f"#workers .worker.alive[data-pid='{site.worker.pid}']")).to_be_visible()
    # Leave the page first: a poll still in flight would set the admin's cookie back after
    # the clear (the sign-in then found itself signed in, or its form's CSRF token stale).
    page.goto("about:blank")
    page.context.clear_cookies()

    # A tenant sees its own jobs, and a worker only while it runs one of them.
    sign_in(page, site)
    page.goto(site.base + "/monitor")
    expect(page.locator("#monitor")).to_have_attribute("data-scope", "owner")
    expect(page.locator("#workers .empty")).to_be_visible()
    expect(page.locator("#queues .empty")).to_be_visible()
    mark_document(page)

    # Queue depth rises while a dozen slow canaries wait for the worker threads, then falls.
    jobs = [site.job(project, {"steps": 2, "step_seconds": 0.6}) for _ in range(12)]
    queue = page.locator(".queue[data-queue=default]")
    expect(queue).to_be_visible()
    depths = []
    wait_for(lambda: depths.append(int(queue.get_attribute("data-depth") or 0)) or
             max(depths) >= 2, 10, "the queue depth to rise")
    expect(page.locator(f"#workers .worker.alive[data-pid='{site.worker.pid}']")).to_be_visible()
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


def _asked(project: str, question: str) -> str:
    """A question in the chat whose reply job is parked (never dispatched): its id."""
    reply_job, message = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, status, payload, "
               "idempotency_key, run_after) VALUES (%s, %s, 'chat.reply', 'queued', "
               "jsonb_build_object('message_id', %s::text), %s, %s)",
               (reply_job, project, message, f"chat:{project}:{message}", FUTURE))
    pg.execute("INSERT INTO chat_messages (id, project_id, role, content, job_id) "
               "VALUES (%s, %s, 'user', %s, %s)", (message, project, question, reply_job))
    return reply_job


def _delta(project: str, reply_job: str, text: str) -> None:
    """A piece of the reply, as the chat job streams it."""
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "VALUES (%s, %s, 'delta', %s, jsonb_build_object('text', %s::text))",
               (reply_job, project, text, text))


def test_a_reply_streamed_while_the_chat_was_hidden_reads_whole_when_it_is_opened(
        short_streams_site: Site, page: Page) -> None:
    site = short_streams_site
    project = site.project("Hidden chat")
    reply_job = _asked(project, "Anyone there?")
    sign_in(page, site)
    # Given the page open on its Jobs section (the chat, in the Overview, not loaded)
    page.goto(f"{site.base}/projects/{project}#jobs")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    # When the reply starts streaming, then the Overview is opened
    _delta(project, reply_job, "Hello ")
    _delta(project, reply_job, "from ")
    page.wait_for_timeout(1500)
    open_section(page, "overview")
    # Then the bubble holds what streamed while it was hidden, and goes on live
    bubble = page.locator(f"#chat-log .msg.streaming[data-job-id='{reply_job}'] .text")
    expect(bubble).to_have_text("Hello from ")
    _delta(project, reply_job, "the overview.")
    expect(bubble).to_have_text("Hello from the overview.")


def _feed_ids(page: Page) -> list[int]:
    return [int(i) for i in page.eval_on_selector_all(
        "#feed li[data-event-id]", "els => els.map((el) => el.dataset.eventId)")]


def test_a_long_history_opens_at_a_recent_window_and_reconnects_send_nothing_twice(
        short_streams_site: Site, page: Page) -> None:
    site = short_streams_site
    project = site.project("Long history")
    # Given a project with 300 old events, 70 chat messages, and a reply being written
    # An hour ago, or today's first moment when that was yesterday: the event log has
    # partitions from the day the test database was made.
    pg.execute("INSERT INTO agent_job_events (project_id, type, message, data, created_at) "
               "SELECT %s, 'log', 'old event ' || i, '{}', greatest(now() - interval '1 hour', "
               "date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') "
               "FROM generate_series(1, 300) AS i", (project,))
    pg.execute("INSERT INTO chat_messages (id, project_id, role, content, created_at) "
               "SELECT gen_random_uuid(), %s, CASE WHEN i %% 2 = 1 THEN 'user' ELSE 'assistant' "
               "END, 'old message ' || i, now() - interval '1 hour' + i * interval '1 second' "
               "FROM generate_series(1, 70) AS i", (project,))
    reply_job = _asked(project, "Are we there yet?")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}")
    page.evaluate("""() => (window.__states = []) && new MutationObserver(
        () => window.__states.push(document.querySelector('#live').dataset.state)).observe(
        document.querySelector('#live'), {attributes: true})""")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    mark_document(page)

    # Then the feed shows the last 100 events, not the whole history (it showed 200 of 300)
    expect(page.locator("#feed li[data-event-id]")).to_have_count(100)
    stored = [r[0] for r in tuples("SELECT id FROM agent_job_events WHERE project_id = %s "
                                   "ORDER BY id DESC", (project,))]
    assert _feed_ids(page) == stored[:100]
    # and "older events" pages back to the first one, newest first, nothing twice
    for shown in (150, 200, 250, 300):
        page.click("#feed-older")
        expect(page.locator("#feed li[data-event-id]")).to_have_count(shown)
    expect(page.locator("#feed-older")).to_be_hidden()  # the last page said there is no more
    assert _feed_ids(page) == stored

    # And the chat shows the newest messages, the question and its pending reply last
    expect(page.locator("#chat-log .msg.user").last).to_contain_text("Are we there yet?")
    expect(page.locator("#chat-log .msg", has_text="old message 70")).to_be_visible()
    expect(page.locator("#chat-log .msg", has_text="old message 1")).to_have_count(0)
    while page.locator("#chat-older").is_visible():
        page.click("#chat-older")
        page.wait_for_timeout(200)
    texts = page.locator("#chat-log .msg .text").all_inner_texts()
    assert [t for t in texts if t.startswith("old message")] == [
        f"old message {i}" for i in range(1, 71)]

    # When the reply streams in across reconnects (each stream ends after 2 s)
    def delta(text: str) -> None:
        _delta(project, reply_job, text)

    bubble = page.locator(f"#chat-log .msg.streaming[data-job-id='{reply_job}'] .text")
    delta("Almost ")
    expect(bubble).to_have_text("Almost ")
    page.wait_for_timeout(6000)
    delta("there.")
    expect(bubble).to_have_text("Almost there.")
    page.wait_for_timeout(6000)

    # Then it reads once, the feed holds every event once, and the page never reloaded
    expect(bubble).to_have_text("Almost there.")
    states = page.evaluate("window.__states")
    # (a stream lasts 2 s: wait for the current one rather than catch a reconnect mid-way)
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    assert page.evaluate("window.__states").count("connecting") >= 2, states
    ids = _feed_ids(page)
    assert len(ids) == len(set(ids)) == 300
    assert_same_document(page)
    shoot(page, "project-long-history")

    # And a job's page opens at its last 200 events too, the rest a page away
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "SELECT %s, %s, 'log', 'job log ' || i, '{}' FROM generate_series(1, 250) AS i",
               (reply_job, project))
    page.goto(f"{site.base}/jobs/{reply_job}")
    events = page.locator("#events li[data-event-id]")
    expect(events).to_have_count(200)
    page.click("#events-older")
    expect(events).to_have_count(252)  # and its two deltas
    expect(page.locator("#events-older")).to_be_hidden()
    ids = [int(i) for i in page.eval_on_selector_all(
        "#events li[data-event-id]", "els => els.map((el) => el.dataset.eventId)")]
    assert ids == sorted(ids) and len(set(ids)) == 252


def test_the_packet_its_cost_and_an_unknown_effect_are_on_the_pages(site: Site, page: Page) -> None:
    # Given a project whose launch wrote a packet (the offline model proposes a deploy, the
    # project having a hook), one of its calls priced by hand (the offline model is free)
    project = site.project("Moonshot")
    site.api("PATCH", f"/api/projects/{project}",
             {"settings": {"deploy_hook_url": "https://hooks.example.test/deploy"}})
    job_id = site.api("POST", f"/api/projects/{project}/launch", {})["job_id"]
    wait_for(lambda: status(job_id) in ("completed", "failed"), 30, "the packet job")
    assert status(job_id) == "completed"
    research = pg.fetch_value("SELECT seq FROM job_steps WHERE job_id = %s AND name = 'research'",
                              (job_id,))
    pg.execute("INSERT INTO llm_usage (project_id, job_id, step_seq, provider, model, "
               "input_tokens, "
               "output_tokens, cost_usd) VALUES (%s, %s, %s, 'anthropic', 'claude-sonnet-4', "
               "1000, 200, 0.006)", (project, job_id, research))
    (packet,) = site.api("GET", f"/api/projects/{project}/packets")["items"]

    # Then the project page shows the packet: title, summary, insights, actions and approvals
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}")
    card = page.locator(f"#packets .packet[data-id='{packet['id']}']")
    expect(card.locator(".packet-title")).to_have_text(packet["title"])
    expect(card.locator(".packet-summary")).to_have_text(packet["summary"])
    expect(card.locator(".insights li")).to_have_count(len(packet["insights"]))
    actions = card.locator(".packet-action")
    expect(actions).to_have_count(len(packet["actions"]))
    expect(card.locator(".packet-action[data-type=deploy_hook]")).to_have_attribute(
        "data-approval-status", "pending")
    shoot(page, "project-packet")

    # When the deploy is approved, its action in the packet says so, live
    deploy = next(a for a in packet["actions"] if a["type"] == "deploy_hook")
    approval = page.locator(f"#approvals .approval[data-id='{deploy['approval']['id']}']")
    approval.locator("button.approve").click()
    expect(card.locator(".packet-action[data-type=deploy_hook]")).to_have_attribute(
        "data-approval-status", "approved")

    # And the job page shows the tokens and cost of each step and in total
    usage = site.api("GET", f"/api/jobs/{job_id}/llm-usage")
    page.goto(f"{site.base}/jobs/{job_id}")
    table = page.locator("#llm-usage table.usage")
    expect(table.locator("tbody tr")).to_have_count(len(usage["steps"]))
    row = table.locator(f"tbody tr[data-seq='{research}']")
    step = next(s for s in usage["steps"] if s["seq"] == research)
    expect(row.locator(".tokens")).to_have_text(str(step["input_tokens"] + step["output_tokens"]))
    expect(row.locator(".cost")).to_have_text("$0.0060")
    total = usage["total"]
    expect(table.locator("tr.total .tokens")).to_have_text(
        str(total["input_tokens"] + total["output_tokens"]))
    expect(table.locator("tr.total .calls")).to_have_text(str(total["calls"]))
    shoot(page, "job-usage")

    # Given an effect of the approved deploy whose outcome nobody knows (the kill -9 that leaves
    # one is in tests/e2e/test_unknown_effects_e2e.py)
    execution = site.api("GET", f"/api/inbox?project_id={project}&status=approved")["items"][0]
    wait_for(lambda: status(execution["execution_job_id"]) in ("completed", "failed"), 30,
             "the execution")
    pg.execute("DELETE FROM action_executions WHERE approval_id = %s", (execution["id"],))
    effect_id = str(uuid.uuid4())
    pg.execute("INSERT INTO action_executions (id, idempotency_key, project_id, approval_id, "
               "job_id, action_type, args, status, error, completed_at) VALUES (%s, %s, %s, %s, "
               "%s, 'deploy_hook', %s::jsonb, 'unknown', 'the hook cannot be asked', now())",
               (effect_id, f"approval:{execution['id']}", project, execution["id"],
                execution["execution_job_id"], json.dumps(execution["action_args"])))

    # Then the inbox shows it as unknown, with the two resolve buttons; resolving it is kept
    page.goto(f"{site.base}/projects/{project}")
    effect = page.locator(f"#effects-unknown .effect[data-id='{effect_id}']")
    expect(effect.locator(".badge")).to_have_text("unknown — check with the provider")
    expect(effect.locator("button.resolve-succeeded")).to_have_text("Resolve succeeded")
    expect(effect.locator("button.resolve-failed")).to_have_text("Resolve failed")
    shoot(page, "project-unknown-effect")
    effect.locator("input.note").fill("nothing in the hook's dashboard")
    effect.locator("button.resolve-failed").click()
    expect(page.locator("#effects-unknown .effect")).to_have_count(0)
    resolved = page.locator(f"#effects .effect[data-id='{effect_id}']")
    expect(resolved).to_have_attribute("data-status", "failed")
    expect(resolved.locator(".resolution")).to_contain_text("nothing in the hook's dashboard")
    assert pg.fetch_value("SELECT status FROM action_executions WHERE id = %s",
                          (effect_id,)) == "failed"


def test_a_name_at_its_limit_wraps_on_every_page_and_a_packet_reads_at_full_width(
        site: Site, page: Page) -> None:
    # Given a project named at the name's limit, in one word, with its idea packet
    name = "Tidewater" * 22 + "AB"  # 200 characters, no space to break at
    project = site.project(name)
    job_id = site.api("POST", f"/api/projects/{project}/launch", {})["job_id"]
    wait_for(lambda: status(job_id) in ("completed", "failed"), 30, "the packet job")
    assert status(job_id) == "completed"
    sign_in(page, site)
    # Then nothing sticks out sideways: the projects, the project page, the monitor
    expect(page.locator("#projects .row .title").first).to_contain_text(name[:40])
    shoot(page, "long-name-projects")
    page.goto(f"{site.base}/projects/{project}")
    card = page.locator("#packets .packet").first
    expect(card.locator(".packet-title")).to_contain_text(name[:40])
    shoot(page, "long-name-project")
    # and on a phone the packet's summary takes the card's width (it took a monitor tile's
    # quarter, a word a line) and its phase is a badge (it took the coding stepper's box)
    page.set_viewport_size({"width": 390, "height": 844})
    width = card.evaluate("(el) => el.getBoundingClientRect().width")
    summary = card.locator(".packet-summary").evaluate("(el) => el.getBoundingClientRect().width")
    assert summary >= 0.9 * width, (summary, width)
    badge = card.locator(".badge.packet-phase").evaluate(
        "(el) => [el.getBoundingClientRect().height, getComputedStyle(el).borderTopWidth]")
    assert badge[0] < 32 and badge[1] != "3px", badge
    page.set_viewport_size(DESKTOP)
    page.goto(site.base + "/monitor")
    expect(page.locator("#canary-project option", has_text=name[:40])).to_have_count(1)
    shoot(page, "long-name-monitor")


def test_a_job_created_through_the_api_appears_in_the_open_jobs_table_and_follows_live(
        site: Site, page: Page) -> None:
    project = site.project("Live jobs")
    # Given a full first page (50 jobs, the page's limit) that never runs
    parked = [site.job(project, {"steps": 1}, run_after=FUTURE) for _ in range(50)]
    sign_in(page, site)
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "/api/jobs/" in r.url else None)
    page.goto(f"{site.base}/projects/{project}#jobs")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    rows = page.locator("#jobs tbody tr[data-job-id]")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-job-id", parked[-1])
    expect(rows.first).to_have_attribute("data-status", "queued")
    mark_document(page)

    # When a job is created through the API, not the page
    job_id = site.job(project, {"steps": 3, "step_seconds": 0.4})

    # Then its row is at the top within a second or two, and its status follows it to the end
    row = page.locator(f"#jobs tr[data-job-id='{job_id}']")
    expect(row).to_be_visible(timeout=2_000)
    expect(rows.first).to_have_attribute("data-job-id", job_id)
    expect(row).to_have_attribute("data-status", "completed", timeout=15_000)
    expect(row.locator(".badge")).to_have_text("completed")
    # and the table keeps its bound, each job once, the newest first
    expect(rows).to_have_count(50)
    ids = rows.evaluate_all("els => els.map((el) => el.dataset.jobId)")
    assert ids == [job_id, *reversed(parked)][:50], ids[:3]
    # (the listed jobs' replayed events are what the list showed: no GET for them)
    assert fetched and all(u.endswith(job_id) for u in fetched), fetched

    # When a listed job and the one pushed off the page change status
    site.api("POST", f"/api/jobs/{parked[1]}/cancel")
    site.api("POST", f"/api/jobs/{parked[0]}/cancel")
    canceled_event = f"#feed .ev-status[data-status=canceled] a[title='{parked[0]}']"
    expect(page.locator(canceled_event)).to_have_count(1)  # the hidden overview's feed is live
    page.wait_for_timeout(1000)
    # Then the listed row follows, and the older one stays off: it belongs on a later page
    expect(page.locator(f"#jobs tr[data-job-id='{parked[1]}']")).to_have_attribute(
        "data-status", "canceled")
    expect(page.locator(f"#jobs tr[data-job-id='{parked[0]}']")).to_have_count(0)
    assert rows.evaluate_all("els => els.map((el) => el.dataset.jobId)") == ids
    assert_same_document(page)


def test_a_report_and_a_page_check_asked_for_on_the_project_page_show_their_files(
        site: Site, page: Page) -> None:
    from tests.support.landing_pages import Landing, serving

    with serving(Landing) as base:
        landing = base + "/"
        project = site.project("Harbour")
        sign_in(page, site)
        page.goto(f"{site.base}/projects/{project}#files")
        # When a report and a page check are asked for with the page's forms
        page.fill("#report-form input[name=topic]", "Tide-aware scheduling")
        page.select_option("#report-form select[name=format]", "pdf")
        page.click("#report-form button[type=submit]")
        page.fill("#check-form input[name=url]", landing)
        page.click("#check-form button[type=submit]")
        # Then their files appear in the panel, live: the PDF with its first page as an image,
        # and the screenshots as images
        files = page.locator("#artifacts .artifact")
        expect(files).to_have_count(4, timeout=90_000)
        # named after its topic (every report was report.pdf)
        expect(page.locator("#artifacts a[download='tide-aware-scheduling.pdf']")).to_be_visible()
        thumbs = page.locator("#artifacts img.thumb")
        expect(thumbs).to_have_count(3)
        page.wait_for_function("() => [...document.querySelectorAll('#artifacts img.thumb')]"
                               ".every((i) => i.complete && i.naturalWidth > 0)")
        shoot(page, "project-files")
        # and the check's job page shows each verdict with its screenshot
        check_job = next(a["job_id"] for a in site.api(
            "GET", f"/api/projects/{project}/artifacts")["items"] if a["kind"] == "screenshot")
        page.goto(f"{site.base}/jobs/{check_job}")
        rows = page.locator("#job-files .check-results tr[data-check]")
        expect(rows).to_have_count(4, timeout=15_000)
        expect(page.locator("#job-files tr[data-check=meta_tags]")).to_have_attribute(
            "data-ok", "true")
        shot = page.locator("#job-files tr[data-check=screenshot] img.thumb")
        expect(shot).to_be_visible()
        page.wait_for_function("() => document.querySelector("
                               "'#job-files tr[data-check=screenshot] img.thumb').naturalWidth"
                               " === 1280")
        shoot(page, "job-check-results")


def test_a_large_step_output_shows_as_a_preview_and_loads_whole_when_asked(
        short_streams_site: Site, page: Page) -> None:
    # Issue 23: the job view cuts outputs over a few KiB to a preview and a link; the page
    # shows the preview and fetches the whole only on request.
    site = short_streams_site
    project = site.project("Big outputs")
    job_id = str(uuid.uuid4())
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, status, payload, "
               "idempotency_key, completed_at) VALUES (%s, %s, 'system.canary', 'completed', "
               "'{}', %s, now())", (job_id, project, f"big:{job_id}"))
    pg.execute("INSERT INTO job_steps (job_id, seq, name, status, output, finished_at) VALUES "
               "(%s, 1, 'small', 'completed', '{\"n\": 1}', now()), "
               "(%s, 2, 'big', 'completed', jsonb_build_object('blob', repeat('q', 100000) "
               "|| 'THE-END'), now())", (job_id, job_id))
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{job_id}")
    big = page.locator("#timeline li[data-seq='2']")
    expect(big.locator("summary")).to_contain_text("cut: 98 KiB")
    big.locator("summary").click()
    expect(big.locator("pre")).to_contain_text('"blob": "qqq')
    assert "THE-END" not in big.inner_text()
    big.get_by_role("button", name="Load the whole output").click()
    expect(big.locator("pre")).to_contain_text("THE-END")
    expect(big.get_by_role("button", name="Load the whole output")).to_have_count(0)
    expect(page.locator("#timeline li[data-seq='1'] details")).to_contain_text('"n": 1')
