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

from tests.e2e.test_ui import Site, open_section, page, sign_in, site  # noqa: F401 (fixtures)

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
    page.goto(f"{site.base}/projects/{project}#jobs")
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
    expect(page.locator(ended)).to_have_count(1)  # in the overview's feed, live though hidden
    page.wait_for_timeout(2500)  # every panel's debounced reload (800 ms at most) has had its turn

    counted = Counter(gets)
    print(f"\nGETs for one finished job: {len(gets)} {dict(counted)}")
    # Then the only reads are the jobs table's, of that job: one per status it moved to that the
    # table showed, coalesced (at most one GET out at a time, and one more after it)
    assert set(counted) == {f"/api/jobs/{job}"}, dict(counted)
    assert len(gets) <= 3, dict(counted)


def test_a_section_loads_only_what_it_shows_and_a_hidden_one_catches_up_when_opened(
        site: Site, page: Page) -> None:  # noqa: F811
    project = site.project("Sections")
    sign_in(page, site)
    gets: list[str] = []
    page.on("request", lambda r: gets.append(p) if r.method == "GET" and (
        p := _api_get(r.url, site.base)) else None)
    base = f"/api/projects/{project}"

    # When the page is opened on a link to its Settings
    page.goto(f"{site.base}/projects/{project}#settings")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    expect(page.locator("#secrets .empty")).to_be_visible()
    expect(page.locator("#section-overview")).to_be_hidden()
    page.wait_for_timeout(1000)
    # Then it read the project (the head, the settings' forms) and its secrets: no jobs, chat,
    # inbox, packets, effects, files, plans, workflows, functions or memory
    assert set(gets) == {base, f"{base}/secrets"}, gets

    # When the Memory section is opened, then left for Jobs while a chat reply (a job that
    # concerns the overview's panels and writes the memory) runs and ends
    gets.clear()
    open_section(page, "memory")
    expect(page.locator("#memory .empty")).to_be_visible()
    assert gets == [f"{base}/memory"], gets
    open_section(page, "jobs")
    reply = site.api("POST", f"{base}/chat", {"message": "What next?"})["job_id"]
    row = page.locator(f"#jobs tr[data-job-id='{reply}']")
    expect(row).to_have_attribute("data-status", "completed", timeout=30_000)
    page.wait_for_timeout(2500)  # the debounced reloads (800 ms at most) have had their turn
    # Then the hidden panels read nothing while hidden: only the jobs list, the job itself and
    # the project (the head above the sections shows its phase)
    assert set(gets) - {f"{base}/memory"} <= {f"{base}/jobs", f"/api/jobs/{reply}", base}, gets
    assert gets.count(f"{base}/memory") == 1, gets

    # And the memory, opened again, reads itself once and shows what the reply wrote
    gets.clear()
    open_section(page, "memory")
    expect(page.locator("#memory dl")).to_contain_text("last-conversation")
    page.wait_for_timeout(500)
    assert gets == [f"{base}/memory"], gets
