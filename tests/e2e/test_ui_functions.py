"""Functions in a real browser (Debian's Chromium, through Playwright) against a real gunicorn
web process, a real worker and a real beat: a function saved through the API is shown with its
versions and code on the project page, run from its form, and its run's job page lists the
tool calls it made, the nested run it waited for, and how many times it was replayed.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.e2e.browser import Page, Site, expect, shoot, sign_in

pytestmark = pytest.mark.e2e

ENDED = 60_000  # ms
# The child takes a few dozen recorded steps: the parent, which looks at once, finds it
# still running and waits (then resumes, replaying its first calls from the record).
CHILD = """
for (let i = 0; i < 25; i++) {
  await supabase.from("function_data").insert({collection: "child", doc: {i}});
}
return {doubled: input.n * 2};
"""
OUTER = """
await supabase.from("function_data").insert({collection: "before", doc: {n: input.n}});
const inner = await tools.tasks.run("double", {n: input.n});
await supabase.from("function_data").insert({collection: "after", doc: inner});
return {inner};
"""


def save(site: Site, project: str, name: str, code: str, description: str = "") -> None:
    site.api("POST", f"/api/projects/{project}/functions",
             {"name": name, "code": code, "description": description})


def test_a_function_is_read_run_and_its_calls_and_replays_shown(site: Site, page: Page) -> None:
    # Given two versions of a function that calls another one
    project = site.project("Functions")
    save(site, project, "double", CHILD)
    save(site, project, "outer", "return {first: true};", "the first try")
    save(site, project, "outer", OUTER, "doubles through a nested run")

    # When the person reads its versions' code on the project page
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}#functions")
    row = page.locator("#functions .function[data-name='outer']")
    expect(row.locator("button.version")).to_have_text(["v2", "v1"])
    row.locator("button.version[data-version='1']").click()
    expect(page.locator("#function-code")).to_have_text("return {first: true};")
    row.locator("button.version[data-version='2']").click()
    expect(page.locator("#function-code")).to_contain_text('tools.tasks.run("double"')
    expect(page.locator("#function-detail")).to_contain_text("doubles through a nested run")

    # Then a bad input is refused by the form, a good one runs and completes live
    page.fill("#fn-input", "{n: 21}")
    page.click("#function-run button[type=submit]")
    expect(page.locator("#function-run .error")).to_contain_text("not valid JSON")
    page.fill("#fn-input", '{"n": 21}')
    page.click("#function-run button[type=submit]")
    run = page.locator("#function-runs .fn-run").first
    expect(run).to_have_attribute("data-status", "completed", timeout=ENDED)
    expect(run.locator(".fn-output")).to_have_text('{"inner":{"doubled":42}}')
    expect(run).to_contain_text("3 calls")
    job_id = run.get_attribute("data-job-id")
    shoot(page, "project-functions")

    # And its job page lists the calls: tool, arguments, result, the nested run, the replays
    run.locator("a").first.click()
    expect(page.locator("#function-calls")).to_be_visible()
    calls = page.locator("#function-calls-list .fn-call")
    expect(calls).to_have_count(3)
    assert [calls.nth(i).get_attribute("data-tool") for i in range(3)] == [
        "db", "tasks.run", "db"]
    expect(calls.nth(0).locator(".call-args")).to_contain_text('"op": "insert"')
    job = site.api("GET", f"/api/jobs/{job_id}")
    nested = next(s for s in job["steps"] if s["name"] == "call:1:tasks.run")["output"]["child"]
    expect(calls.nth(1).locator(f"a[href='/jobs/{nested}']")).to_be_visible()
    expect(calls.nth(1)).to_contain_text('{"doubled":42}')

    # The replay counts are the job's own: one per resume after the first run
    starts = [datetime.fromisoformat(e["created_at"]) for e in site.api(
        "GET", f"/api/jobs/{job_id}/events/history?types=status&limit=500")["items"]
        if e["data"].get("status") == "running"]
    assert len(starts) >= 2, "the parent never waited for its nested run"
    expect(page.locator("#function-replays")).to_have_attribute(
        "data-replays", str(len(starts) - 1))
    for i, step in enumerate(s for s in job["steps"] if s["name"].startswith("call:")):
        recorded = datetime.fromisoformat(step["finished_at"])
        expect(calls.nth(i)).to_have_attribute(
            "data-replays", str(sum(1 for t in starts if t > recorded)))
    expect(calls.nth(0)).not_to_have_attribute("data-replays", "0")  # answered from the record
    shoot(page, "function-job")


def test_a_function_is_saved_from_the_page_a_syntax_error_marked_and_nothing_written(
        site: Site, page: Page) -> None:
    # Given a project with no function, its Functions section open (the README's step 9)
    project = site.project("Saved by hand")
    sign_in(page, site)
    page.goto(f"{site.base}/projects/{project}#functions")
    expect(page.locator("#functions")).to_contain_text("Save one below")
    page.click("#function-new summary")
    # When the person saves code with a syntax error on its second line
    page.fill("#fn-name", "add")
    page.fill("#fn-code", "export async function runTask(input) {\n  return input.a +;\n}\n")
    page.click("#function-save button[type=submit]")
    # Then the error names the line, the code keeps its text, and nothing was saved
    expect(page.locator("#function-save-error")).to_contain_text("line 2")
    assert site.api("GET", f"/api/projects/{project}/functions")["items"] == []
    # When it is fixed and saved, as a model writes it (main, not runTask)
    page.fill("#fn-code", "export async function main(input) {\n"
                          "  return { sum: input.a + input.b };\n}\n")
    page.fill("#fn-description", "adds two numbers")
    page.click("#function-save button[type=submit]")
    # Then it is listed and shown, and runs from its form
    expect(page.locator("#functions .function[data-name='add'] button.version")).to_have_text(
        ["v1"])
    expect(page.locator("#function-code")).to_contain_text("input.a + input.b")
    page.fill("#fn-input", '{"a": 2, "b": 3}')
    page.click("#function-run button[type=submit]")
    run = page.locator("#function-runs .fn-run").first
    expect(run).to_have_attribute("data-status", "completed", timeout=ENDED)
    expect(run.locator(".fn-output")).to_have_text('{"sum":5}')
    shoot(page, "function-saved-from-the-page")
