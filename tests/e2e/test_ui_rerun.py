"""Rerun from a step in a real browser (issue 27): on a finished job's page, "Rerun from here"
on a step opens its payload for editing; the rerun's page shows it is one, and the two runs'
step outputs side by side, the steps before marked as copied."""

from __future__ import annotations

import json

import pytest

from tests.e2e.browser import Page, Site, expect, shoot, sign_in
from tests.integration.jobdb import tuples

pytestmark = pytest.mark.e2e


def test_rerun_from_a_step_with_an_edited_payload_and_compare_the_runs(site: Site,
                                                                       page: Page) -> None:
    project = site.project("Reruns")
    original = site.job(project, {"steps": 3})
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{original}")
    expect(page.locator("#j-status")).to_contain_text("completed", timeout=30_000)

    # When a person reruns it from step 2, with five steps instead of three
    step = page.locator("#timeline li[data-seq='2']")
    step.get_by_role("button", name="Rerun from here").click()
    box = step.locator("form.rerun-form")
    payload = json.loads(box.locator("textarea").input_value())
    assert payload["steps"] == 3
    box.locator("textarea").fill(json.dumps({**payload, "steps": 5}))
    shoot(page, "rerun-form")
    box.get_by_role("button", name="Rerun from step-2").click()

    # Then its page is the rerun's: it says what it reruns, completes, and compares
    page.wait_for_url(lambda url: "/jobs/" in url and original not in url)
    rerun = page.url.rsplit("/", 1)[1]
    expect(page.locator("#j-status")).to_contain_text("completed", timeout=30_000)
    expect(page.locator("#j-meta")).to_contain_text("rerun of")
    table = page.locator("#rerun-compare table.compare")
    expect(table.locator("tbody tr")).to_have_count(5)
    expect(table.locator("tr[data-seq='1'] td").nth(1)).to_contain_text("(copied)")
    expect(table.locator("tr[data-seq='2'] td").nth(1)).not_to_contain_text("(copied)")
    expect(table.locator("tr[data-seq='5'] td").nth(0)).to_contain_text("—")
    expect(table.locator("tr[data-seq='5'] td").nth(1)).to_contain_text('"n": 5')
    shoot(page, "rerun-compare")
    assert tuples("SELECT name, attempts FROM job_steps WHERE job_id = %s ORDER BY seq",
                  (rerun,)) == [("step-1", 0), ("step-2", 1), ("step-3", 1), ("step-4", 1),
                                ("step-5", 1)]


def test_a_running_job_offers_no_rerun(site: Site, page: Page) -> None:
    project = site.project("Busy")
    busy = site.job(project, {"steps": 2, "step_seconds": 20})
    sign_in(page, site)
    page.goto(f"{site.base}/jobs/{busy}")
    expect(page.locator("#timeline li.step").first).to_be_visible(timeout=30_000)
    expect(page.get_by_role("button", name="Rerun from here")).to_have_count(0)
    site.api("POST", f"/api/jobs/{busy}/cancel")
