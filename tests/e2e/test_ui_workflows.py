"""Workflows in a real browser (Debian's Chromium, through Playwright) against a real gunicorn
web process, a real worker and a real beat: a workflow saved through the API is run from the
project page's form, and its run page draws the DAG whose nodes turn completed live; a gated
step is approved (and another rejected) on the run page, and the run goes on.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tasks.engine import pg
from tests.e2e.browser import (
    Page,
    Site,
    assert_same_document,
    expect,
    mark_document,
    node,
    shoot,
    sign_in,
)

pytestmark = pytest.mark.e2e

ENDED = 60_000  # ms: a run of a few canaries on a loaded 2-core machine, with room to spare
SLOW = {"steps": 2, "step_seconds": 0.6}


def save(site: Site, project: str, name: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return site.api("POST", f"/api/projects/{project}/workflows", {"name": name, "steps": steps})


def test_a_workflow_run_from_the_project_page_draws_its_dag_and_follows_it_live(
        site: Site, page: Page) -> None:
    # Given a diamond-shaped workflow, saved twice (v2 waits on its inputs' n)
    project = site.project("Pipelines")
    diamond = [
        {"name": "fetch", "job_type": "system.canary",
         "payload": {**SLOW, "steps": "{{inputs.n}}"}},
        {"name": "left", "job_type": "system.canary", "depends_on": ["fetch"], "payload": SLOW},
        {"name": "right", "job_type": "system.canary", "depends_on": ["fetch"], "payload": SLOW},
        {"name": "join", "job_type": "system.canary", "depends_on": ["left", "right", "fetch"],
         "payload": {"steps": "{{steps.fetch.output.steps}}"}},
    ]
    save(site, project, "nightly", diamond[:1])
    v2 = save(site, project, "nightly", diamond)
    assert v2["version"] == 2

    # When the person opens the project page and picks version 1, then version 2
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}#plans")
    row = page.locator("#workflows .workflow[data-name='nightly']")
    expect(row.locator("button.version")).to_have_text(["v2", "v1"])
    row.locator("button.version[data-version='1']").click()
    expect(page.locator("#workflow-detail svg.dag .dag-node")).to_have_count(1)
    expect(page.locator("#workflow-runs .empty")).to_be_visible()
    v2_button = row.locator("button.version[data-version='2']")
    v2_button.click()
    expect(v2_button).to_have_attribute("aria-pressed", "true")
    detail = page.locator("#workflow-detail")
    expect(detail.locator("svg.dag .dag-node")).to_have_count(4)
    expect(detail.locator("svg.dag .dag-edge")).to_have_count(5)  # fetch → join skips a row
    expect(detail.locator(".wf-steps li[data-step='join']")).to_contain_text(
        "after left, right, fetch")

    # Then bad inputs are refused next to the form, and good ones start a run
    page.fill("#wf-inputs", "[1, 2]")
    page.click("#workflow-run button[type=submit]")
    expect(detail.locator("#workflow-run .error")).to_contain_text("not a valid JSON object")
    page.fill("#wf-inputs", '{"n": 2}')
    page.click("#workflow-run button[type=submit]")
    run_row = page.locator("#workflow-runs .wf-run").first
    expect(run_row).to_be_visible()
    job_id = run_row.get_attribute("data-job-id")
    assert job_id
    shoot(page, "project-workflows")

    # And the run page draws the DAG, each node turning completed with no reload
    run_row.locator("a").click()
    expect(page.locator("#r-name")).to_have_text("nightly")
    expect(page.locator("#r-version")).to_have_text("v2")
    mark_document(page)
    expect(page.locator("#dag .dag-node")).to_have_count(4)
    expect(page.locator("#dag .dag-edge")).to_have_count(5)
    seen: set[str] = set()
    deadline = time.monotonic() + ENDED / 1000
    while (status := node(page, "join").get_attribute("data-status")) != "completed":
        seen.add(status or "")
        assert page.locator("#r-status .badge").inner_text() not in ("failed", "canceled")
        assert time.monotonic() < deadline, f"the run did not end; join was {seen}"
        page.wait_for_timeout(100)
    for name in ("fetch", "left", "right", "join"):
        expect(node(page, name)).to_have_attribute("data-status", "completed", timeout=ENDED)
    expect(page.locator("#r-status .badge")).to_have_text("completed", timeout=ENDED)
    assert "pending" in seen, f"the last node was never seen before it completed: {seen}"
    expect(node(page, "join").locator("text.dag-status")).to_have_text("completed")
    expect(page.locator("#live")).to_have_attribute("data-state", "closed")
    assert_same_document(page)

    # The page agrees with the API, and each node links to its step's job
    run = site.api("GET", f"/api/workflow-runs/{job_id}")
    assert {n: s["status"] for n, s in run["steps"].items()} == dict.fromkeys(
        ("fetch", "left", "right", "join"), "completed")
    join_job = run["steps"]["join"]["job_id"]
    expect(page.locator(f"#dag a[href='/jobs/{join_job}']")).to_have_count(1)
    expect(page.locator("#run-steps tr[data-step='join'] a")).to_have_attribute(
        "href", f"/jobs/{join_job}")
    shoot(page, "workflow-run")

    # The run's job page links back to the run page, and a step's job to its run
    page.goto(f"{site.base}/jobs/{join_job}")
    expect(page.locator("#j-links a")).to_have_attribute("href", f"/workflow-runs/{job_id}")
    page.goto(f"{site.base}/jobs/{job_id}")
    page.locator("#j-links a").click()
    expect(page.locator("#dag .dag-node[data-status='completed']")).to_have_count(4)


def test_gated_steps_are_approved_and_rejected_on_the_run_page(site: Site, page: Page) -> None:
    # Given a run whose two gated steps wait for a person after their common upstream
    project = site.project("Releases")
    wf = save(site, project, "release", [
        {"name": "build", "job_type": "system.canary", "payload": {"steps": 1}},
        {"name": "deploy", "job_type": "system.canary", "depends_on": ["build"],
         "requires_approval": True, "payload": {"steps": "{{steps.build.output.steps}}"}},
        {"name": "announce", "job_type": "system.canary", "depends_on": ["build"],
         "requires_approval": True, "on_failure": "continue", "payload": {"steps": 1}},
    ])
    job_id = site.api("POST", f"/api/workflows/{wf['id']}/runs", {"inputs": {}})["job_id"]
    sign_in(page, site)
    page.goto(f"{site.base}/workflow-runs/{job_id}")
    mark_document(page)

    # When both gates are reached, the page shows each with the payload that will run
    for name in ("deploy", "announce"):
        expect(node(page, name)).to_have_attribute("data-status", "waiting_approval", timeout=ENDED)
    deploy = page.locator("#gates .approval[data-step='deploy']")
    expect(deploy.locator("pre.json")).to_contain_text('"steps": 1')  # build's output, resolved
    expect(page.locator("#r-status .badge")).to_have_text("waiting")
    shoot(page, "workflow-run-gated")

    # Then approving one runs it, rejecting the other fails that step (the run goes on)
    deploy.locator("button.approve").click()
    expect(node(page, "deploy")).to_have_attribute("data-status", "completed", timeout=ENDED)
    page.locator("#gates .approval[data-step='announce'] button.reject").click()
    expect(node(page, "announce")).to_have_attribute("data-status", "failed", timeout=ENDED)
    expect(page.locator("#r-status .badge")).to_have_text("completed", timeout=ENDED)
    expect(page.locator("#gates-card")).to_be_hidden()
    expect(page.locator("#run-steps tr[data-step='announce'] .error")).to_contain_text("rejected")
    assert_same_document(page)

    # And the inbox agrees: one approved, one rejected, each decided once
    run = site.api("GET", f"/api/workflow-runs/{job_id}")
    decided = {a["id"]: a["status"] for a in site.api(
        "GET", f"/api/inbox?project_id={project}&status=all")["items"]}
    assert decided[run["steps"]["deploy"]["approval_id"]] == "approved"
    assert decided[run["steps"]["announce"]["approval_id"]] == "rejected"
    assert pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE parent_job_id = %s",
                          (job_id,)) == 2  # build and deploy: nothing ran for announce


def test_a_workflow_is_saved_from_the_project_page_and_a_bad_one_names_its_problems(
        site: Site, page: Page) -> None:
    project = site.project("Saved from the page")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}#plans")
    expect(page.locator("#workflows .empty")).to_be_visible()
    page.locator("#workflow-new summary").click()
    # A cycle and an unknown job type: every problem listed, nothing saved
    page.fill("#wf-steps", '[{"name": "a", "job_type": "system.canary", "depends_on": ["b"]},'
                           ' {"name": "b", "job_type": "no.such", "depends_on": ["a"]}]')
    page.click("#workflow-save button[type=submit]")
    problems = page.locator("#workflow-save ul.error li")
    expect(problems.first).to_be_visible()
    text = " ".join(problems.all_text_contents())
    assert "cycle" in text and "no.such" in text, text
    assert pg.fetch_value("SELECT count(*) FROM workflows WHERE project_id = %s", (project,)) == 0
    # The example the form starts with saves as version 1 and shows up, ready to run
    page.reload()
    page.locator("#workflow-new summary").click()
    page.click("#workflow-save button[type=submit]")
    row = page.locator("#workflows .workflow[data-name='demo pipeline']")
    expect(row.locator("button.version")).to_have_text(["v1"])
    row.locator("button.version").click()
    expect(page.locator("#workflow-detail svg.dag .dag-node")).to_have_count(3)
