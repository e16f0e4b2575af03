"""The project page's Settings section in Chromium: the project, its time zone, budgets, effect
permissions and secrets, each saved with its form and checked against the API and PostgreSQL;
a refused value shows the API's message and writes nothing. And every section at 390 px."""

from __future__ import annotations

import pytest

from tasks.engine import pg
from tests.e2e.browser import Page, Site, expect, open_section, shoot, sign_in

pytestmark = pytest.mark.e2e

SECTIONS = ("overview", "jobs", "code", "plans", "functions", "files", "memory", "settings")


def settings_of(project: str) -> dict:
    return pg.fetch_value("SELECT settings FROM projects WHERE id = %s", (project,))


def save(page: Page, form: str) -> None:
    page.click(f"{form} button[type=submit]")


def test_the_settings_section_saves_each_form_and_refuses_what_the_api_refuses(
        site: Site, page: Page) -> None:
    project = site.project("Harbour lights")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}#settings")
    expect(page.locator("#st-name")).to_have_value("Harbour lights")
    expect(page.locator("#sections a[data-section=settings]")).to_have_attribute(
        "aria-current", "page")
    assert page.title().startswith("Settings · Harbour lights")

    # A zone that is not an IANA name: the API's message, nothing written
    page.fill("#st-timezone", "Mars/Olympus_Mons")
    save(page, "#settings-form")
    expect(page.locator("#settings-error")).to_contain_text("IANA")
    assert "timezone" not in settings_of(project)

    # The project's name, night shift, zone and contact, saved together
    page.fill("#st-name", "Harbour lights at night")
    page.check("#st-night")
    page.fill("#st-timezone", "Europe/Berlin")
    save(page, "#settings-form")
    expect(page.locator("#settings-error")).to_be_hidden()
    expect(page.locator("#p-name")).to_have_text("Harbour lights at night")  # the head follows
    stored = site.api("GET", f"/api/projects/{project}")
    assert stored["name"] == "Harbour lights at night" and stored["night_shift"] is True
    assert stored["settings"]["timezone"] == "Europe/Berlin"
    assert "contact_email" not in stored["settings"]  # left empty: not set

    # Budgets; an emptied one is cleared, not zero
    page.fill("#st-tokens", "50000")
    page.fill("#st-usd", "2.5")
    save(page, "#budgets-form")
    page.wait_for_function("() => !document.querySelector('#budgets-form button').disabled")
    expect(page.locator("#budgets-error")).to_be_hidden()
    assert settings_of(project)["llm_daily_token_budget"] == 50000
    assert settings_of(project)["llm_daily_usd_budget"] == 2.5
    page.fill("#st-tokens", "")
    save(page, "#budgets-form")
    page.wait_for_function("() => !document.querySelector('#budgets-form button').disabled")
    assert "llm_daily_token_budget" not in settings_of(project)
    expect(page.locator("#st-usd")).to_have_value("2.5")

    # Permissions: the table starts at the defaults; only what changed is written
    rows = page.locator("#permissions-rows tr")
    expect(rows).to_have_count(4)
    expect(page.locator("input[name=allow-email]")).to_be_checked()
    expect(page.locator("input[name=allow-github_dispatch]")).not_to_be_checked()
    expect(page.locator("input[name=cap-email]")).to_have_attribute("placeholder", "50")
    page.check("input[name=allow-github_dispatch]")
    page.fill("input[name=cap-email]", "501")  # over the server's ceiling (500)
    save(page, "#permissions-form")
    expect(page.locator("#permissions-error")).to_contain_text("at most 500")
    assert "permissions" not in settings_of(project)
    page.fill("input[name=cap-email]", "10")
    page.fill("#st-github", "octo/lights")
    save(page, "#permissions-form")
    page.wait_for_function("() => !document.querySelector('#permissions-form button').disabled")
    expect(page.locator("#permissions-error")).to_be_hidden()
    written = settings_of(project)
    assert written["permissions"] == {"github_dispatch": True}, written
    assert written["caps"] == {"email_per_day": 10}, written
    assert written["github_repo"] == "octo/lights"

    # A change made elsewhere meanwhile is kept by a form that did not touch it, and the saved
    # form shows what is stored
    site.api("PATCH", f"/api/projects/{project}", {"settings": {"timezone": "Asia/Tokyo"}})
    page.fill("#st-name", "Harbour lights, renamed")
    save(page, "#settings-form")
    expect(page.locator("#p-name")).to_have_text("Harbour lights, renamed")
    assert settings_of(project)["timezone"] == "Asia/Tokyo"
    expect(page.locator("#st-timezone")).to_have_value("Asia/Tokyo")

    # Secrets: set, listed by name, its value never on the page; a bad name refused; deleted
    page.fill("#sc-name", "Bad Name")
    page.fill("#sc-value", "x")
    page.click("#secret-form button[type=submit]")
    expect(page.locator("#secret-error")).to_contain_text("lowercase")
    assert site.api("GET", f"/api/projects/{project}/secrets")["items"] == []
    page.fill("#sc-name", "resend_api_key")
    page.fill("#sc-value", "re_live_5f4dcc3b5aa765d61d8327deb882cf99")
    page.click("#secret-form button[type=submit]")
    item = page.locator("#secrets li[data-name=resend_api_key]")
    expect(item).to_be_visible()
    expect(page.locator("#sc-value")).to_have_value("")
    assert "5f4dcc3b5aa765d61d8327deb882cf99" not in page.content()
    assert [s["name"] for s in site.api("GET", f"/api/projects/{project}/secrets")["items"]] == [
        "resend_api_key"]
    shoot(page, "project-settings")
    page.once("dialog", lambda d: d.accept())
    item.locator("button.danger").click()
    expect(page.locator("#secrets .empty")).to_be_visible()
    assert site.api("GET", f"/api/projects/{project}/secrets")["items"] == []

    # And a reload opens the same section, as saved
    page.reload()
    expect(page.locator("#section-settings")).to_be_visible()
    expect(page.locator("#st-timezone")).to_have_value("Asia/Tokyo")
    expect(page.locator("input[name=allow-github_dispatch]")).to_be_checked()


def test_every_section_fits_a_phone(site: Site, page: Page) -> None:
    project = site.project("Pocket")
    site.job(project, {"steps": 1})
    sign_in(page, site)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{site.base}/projects/{project}")
    expect(page.locator("#live")).to_have_attribute("data-state", "live")
    # Every link of the bar is on screen (it wraps rather than scroll sections out of sight)
    for name in SECTIONS:
        link = page.locator(f"#sections a[data-section='{name}']")
        box = link.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (name, box)
    for name in SECTIONS:
        open_section(page, name)
        shoot(page, f"project-section-{name}")  # nothing sticks out sideways, at 390 and 1440
        page.set_viewport_size({"width": 390, "height": 844})
