"""The monitor's schedules in a real browser (issue 27): a project's night shift at its local
time, in its own time zone, with its next runs; the zone set on the project's settings."""

from __future__ import annotations

import pytest

from tests.e2e.browser import Page, Site, expect, shoot, sign_in

pytestmark = pytest.mark.e2e


def test_the_monitor_lists_a_projects_schedule_in_its_time_zone(site: Site, page: Page) -> None:
    project = site.api("POST", "/api/projects", {"name": "Tokyo office", "night_shift": True,
                                                 "settings": {"timezone": "Asia/Tokyo"}})["id"]
    sign_in(page, site)
    page.goto(site.base + "/monitor")
    row = page.locator(f"#schedules tr[data-project='{project}']"
                       "[data-schedule='nightshift.cycle_project']")
    expect(row).to_contain_text("Night shift")
    expect(row).to_contain_text("Asia/Tokyo")
    expect(row.locator(".next-runs > div")).to_have_count(3)
    shoot(page, "monitor-schedules")
