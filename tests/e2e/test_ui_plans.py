"""Plans in a real browser (Debian's Chromium, through Playwright) against a real gunicorn web
process, a real worker and a real beat, with the offline scripted planner: a goal given on the
project page becomes a plan of tasks that waits for approval; the plan page's editor refuses a
broken edit naming its problem, saves a good one as a new version, and the approval of that
version runs the tasks, whose DAG nodes turn completed live.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.browser import (
    Page,
    Site,
    assert_same_document,
    expect,
    mark_document,
    node,
    open_section,
    shoot,
    sign_in,
)

pytestmark = pytest.mark.e2e

ENDED = 90_000  # ms: the planner's asks and three agent tasks on a loaded 2-core machine


def task_row(page: Page, task: str) -> Any:
    return page.locator(f"#plan-edit-tasks fieldset.task-edit[data-task='{task}']")


def test_a_goal_becomes_a_plan_edited_approved_and_run_live(site: Site, page: Page) -> None:
    # Given a project, a goal is handed to the planner from the project page
    project = site.project("Almanac")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}")
    open_section(page, "plans")
    page.fill("#pl-name-in", "Launch week")
    page.fill("#pl-goal-in", "Announce the almanac to amateur astronomers")
    page.click("#plan-form button[type=submit]")
    row = page.locator("#plans .plan").first
    expect(row.locator("a.title")).to_have_text("Launch week")
    plan_id = row.get_attribute("data-plan-id")
    expect(row).to_have_attribute("data-status", "awaiting_approval", timeout=ENDED)
    shoot(page, "project-plans")

    # When its page opens, the plan waits for approval, its tasks drawn as a DAG
    row.locator("a.title").click()
    expect(page.locator("#pl-status .badge")).to_have_text("awaiting_approval")
    mark_document(page)
    expect(page.locator("#dag .dag-node")).to_have_count(3)
    expect(page.locator("#dag .dag-edge")).to_have_count(3)
    expect(page.locator("#review-card")).to_be_visible()
    expect(page.locator("#plan-decision button.approve")).to_be_enabled()

    # Then an edit naming a task that does not exist is refused, its problem listed
    deps = task_row(page, "review").locator("input[name=depends_on]")
    deps.fill("draft, nowhere")
    expect(page.locator("#plan-decision button.approve")).to_be_disabled()  # unsaved edits
    page.click("#plan-save")
    expect(page.locator("#plan-edit-problems")).to_contain_text("nowhere")
    assert site.api("GET", f"/api/plans/{plan_id}")["version"] == 1

    # And a good edit (a dependency fixed, a task added) is saved as version 2
    deps.fill("draft")
    page.click("#plan-add-task")
    added = page.locator("#plan-edit-tasks fieldset.task-edit").last
    added.locator("input[name=id]").fill("announce")
    added.locator("input[name=assigned_to]").fill("writer")
    added.locator("input[name=depends_on]").fill("review")
    added.locator("textarea[name=description]").fill("Write the announcement <b>post</b>")
    page.click("#plan-save")
    expect(page.locator("#pl-version")).to_have_text("v2")
    expect(page.locator("#plan-versions li")).to_have_count(2)
    expect(page.locator("#dag .dag-node")).to_have_count(4)
    expect(page.locator("#plan-tasks tr[data-task='announce'] .task-desc")).to_have_text(
        "Write the announcement <b>post</b>")  # text, never markup
    stored = site.api("GET", f"/api/plans/{plan_id}")
    assert {t["id"]: t["depends_on"] for t in stored["tasks"]}["review"] == ["draft"]
    shoot(page, "plan-review")

    # When version 2 is approved, the tasks run and their nodes turn completed, no reload
    page.locator("#plan-decision button.approve").click()
    expect(page.locator("#review-card")).to_be_hidden(timeout=ENDED)
    for task in ("research", "draft", "review", "announce"):
        expect(node(page, task)).to_have_attribute("data-status", "completed", timeout=ENDED)
    expect(page.locator("#pl-status .badge")).to_have_text("completed", timeout=ENDED)
    assert_same_document(page)
    job = next(t["job_id"] for t in site.api("GET", f"/api/plans/{plan_id}")["tasks"]
               if t["id"] == "announce")
    expect(node(page, "announce").locator("xpath=ancestor::*[local-name()='a']")).to_have_attribute(
        "href", f"/jobs/{job}")
    shoot(page, "plan-done")
