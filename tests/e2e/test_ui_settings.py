"""The project page's Settings section in Chromium: the project, its time zone, budgets, effect
permissions and secrets, each saved with its form and checked against the API and PostgreSQL;
a refused value shows the API's message and writes nothing. And every section at 390 px."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg
from tests.e2e.browser import Page, Site, expect, open_section, shoot, sign_in
from tests.e2e.procs import Procs

pytestmark = pytest.mark.e2e

SECTIONS = ("overview", "jobs", "code", "plans", "functions", "files", "memory", "settings")


def settings_of(project: str) -> dict:
    return pg.fetch_value("SELECT settings FROM projects WHERE id = %s", (project,))


def save(page: Page, form: str) -> None:
    page.click(f"{form} button[type=submit]")


def stored(project: str, holds: Callable[[dict], bool]) -> dict:
    """The project's settings once they satisfy `holds` (a form's save is asynchronous)."""
    deadline = time.monotonic() + 15
    while not holds(current := settings_of(project)):
        assert time.monotonic() < deadline, current
        time.sleep(0.1)
    return current


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

    # This server lets no project's coding agent reach the network: the switch says so
    expect(page.locator("#st-network")).to_be_disabled()
    expect(page.locator("#st-network-hint")).to_contain_text("Not offered on this server")

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


@pytest.fixture
def offering_site(procs: Procs) -> Site:
    """A web process whose operator runs another model for planning, offers projects more
    (one of a provider it has no key for) and lets their coding agents reach the network; no
    worker: the forms only write settings."""
    web, base = procs.web(threads=16, env={
        "SWITCHYARD_LLM_MODEL_PLAN": "scripted-planner",
        "SWITCHYARD_LLM_PROJECT_MODELS": "scripted/scripted-large,anthropic/claude-opus-4-6",
        "SWITCHYARD_CODE_NETWORK_ALLOWED": "true"})
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, "lin")
    return Site(base, token, owner_id, web, None)


def test_models_by_role_and_the_coding_agent_are_set_in_the_settings_section(
        offering_site: Site, page: Page) -> None:
    site = offering_site
    project = site.project("Lighthouse")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}#settings")

    # Each role starts at the server's choice; the picks are what this server offers
    plan = page.locator("select[name=model-plan]")
    expect(plan).to_have_value("")
    expect(plan.locator("option").first).to_have_text(
        "scripted/scripted-planner (the server's choice)")
    expect(page.locator("#models-rows th")).to_have_text([  # the roles, in the API's order
        "Planning", "Building and debugging", "Exploring a repository", "Reviewing", "Chat",
        "Packets", "Reports", "Night shift", "Functions"])
    assert plan.locator("option").all_inner_texts()[1:] == [
        "scripted/scripted-1", "scripted/scripted-planner", "scripted/scripted-large"]  # no key

    # A pick is written for its role alone
    page.select_option("select[name=model-build]", "scripted/scripted-large")
    save(page, "#models-form")
    stored(project, lambda s: s.get("llm_models") == {
        "build": {"provider": "scripted", "model": "scripted-large"}})
    expect(page.locator("#models-error")).to_be_hidden()

    # A model set before and withdrawn since is shown as set and kept by a save elsewhere in
    # the form; the server's choice again clears the role
    pg.execute("UPDATE projects SET settings = jsonb_set(settings, '{llm_models,chat}', %s) "
               "WHERE id = %s", (json.dumps({"provider": "scripted", "model": "scripted-0"}),
                                 project))
    page.reload()
    chat = page.locator("select[name=model-chat]")
    expect(chat).to_have_value("scripted/scripted-0")
    expect(chat.locator("option:checked")).to_contain_text("no longer offered")
    page.select_option("select[name=model-build]", "")
    save(page, "#models-form")
    stored(project, lambda s: s.get("llm_models") == {
        "chat": {"provider": "scripted", "model": "scripted-0"}})

    # The coding agent's setup commands, one a line, and its network where it is offered
    expect(page.locator("#st-network")).to_be_enabled()
    page.fill("#st-setup", "npm ci\n\n   npm run build  \n")
    page.check("#st-network")
    save(page, "#coding-form")
    stored(project, lambda s: s.get("code_setup") == ["npm ci", "npm run build"]
           and s.get("code_network") is True)
    expect(page.locator("#st-setup")).to_have_value("npm ci\nnpm run build")

    # 21 commands: the API's message, nothing written
    page.fill("#st-setup", "\n".join(f"echo {i}" for i in range(21)))
    save(page, "#coding-form")
    expect(page.locator("#coding-error")).to_contain_text("code_setup")
    assert settings_of(project)["code_setup"] == ["npm ci", "npm run build"]

    # Emptied, the commands are cleared; the switch off is written as off
    page.fill("#st-setup", "")
    page.uncheck("#st-network")
    save(page, "#coding-form")
    stored(project, lambda s: "code_setup" not in s and s.get("code_network") is False)

    # A command set through the API spanning lines: the field cannot show it one a line, so
    # it is read-only, and saving the switch leaves the commands as they are
    heredoc = "cat > .env <<EOF\nPORT=3000\nEOF"
    site.api("PATCH", f"/api/projects/{project}", {"settings": {"code_setup": [heredoc]}})
    page.reload()
    expect(page.locator("#st-setup")).not_to_be_editable()
    expect(page.locator("#st-setup-hint")).to_contain_text("through the API")
    page.check("#st-network")
    save(page, "#coding-form")
    stored(project, lambda s: s.get("code_network") is True)
    assert settings_of(project)["code_setup"] == [heredoc]
    shoot(page, "project-settings-models")


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
