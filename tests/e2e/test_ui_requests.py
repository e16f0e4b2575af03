"""What one finished job costs the project page: the GETs of the panels it concerns, no more.

Issue 22, part 4. Before, every panel read itself again at any status event: on the commit
before the change this test counted 9 GETs for one canary (3 of the job by the jobs table,
and one each by the approvals inbox, the packets, the effects, the plans, the memory and the
project's head), for a job that concerns the jobs table alone.
"""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest

from tests.e2e.test_ui import Site, page, sign_in, site  # noqa: F401 (fixtures)

with contextlib.suppress(ImportError):  # reported by the `page` fixture
    from playwright.sync_api import Page, expect

pytestmark = pytest.mark.e2e


def _api_get(url: str, base: str) -> str | None:
    """The path of an API GET the page made, the event streams aside."""
    path = url.removeprefix(base).split("?")[0]
    if not path.startswith("/api/") or (path.endswith("/events") and "/history" not in path):
        return None
    return path


def test_one_finished_job_costs_only_the_gets_of_the_panels_it_concerns(
        site: Site, page: Page) -> None:  # noqa: F811
    project = site.project("Requests")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    expect(page.locator("#jobs .empty")).to_be_visible()
    page.wait_for_timeout(1500)  # the panels' first reads are over

    gets: list[str] = []
    page.on("request", lambda r: gets.append(p) if r.method == "GET" and (
        p := _api_get(r.url, site.base)) else None)
    # When a canary runs and finishes (it concerns the jobs table, and nothing else shown)
    job = site.job(project, {"steps": 1, "step_seconds": 0.1})
    row = page.locator(f"#jobs tr[data-job-id='{job}']")
    expect(row).to_have_attribute("data-status", "completed", timeout=15_000)
    ended = f"#feed .ev-status[data-status=completed] a[title='{job}']"
    expect(page.locator(ended)).to_be_visible()
    page.wait_for_timeout(2500)  # every panel's debounced reload (800 ms at most) has had its turn

    counted = Counter(gets)
    print(f"\nGETs for one finished job: {len(gets)} {dict(counted)}")
    # Then the only reads are the jobs table's, of that job: one per status it moved to that the
    # table showed, coalesced (at most one GET out at a time, and one more after it)
    assert set(counted) == {f"/api/jobs/{job}"}, dict(counted)
    assert len(gets) <= 3, dict(counted)
