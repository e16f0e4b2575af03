"""Functions over HTTP: immutable versions, a syntax error a 422 with line and column that
writes nothing (an import or require() too, naming its line), CommonJS exports
saved and run, runs started and listed, another owner's functions not found."""

from __future__ import annotations

import pytest

from tasks.engine import pg
from tests.integration.jobdb import wait_for
from tests.integration.test_api_contract import Caller, alice, bob, client  # noqa: F401

V1 = "export async function runTask(input, tools) {\n  return {hello: input.who};\n}\n"
V2 = "return {hi: input.who};\n"


def url(caller: Caller, rest: str = "") -> str:
    return f"/api/projects/{caller.project}/functions{rest}"


def rows() -> int:
    return int(pg.fetch_value("SELECT count(*) FROM functions"))


def test_each_save_is_a_new_immutable_version(alice: Caller) -> None:  # noqa: F811
    first = alice.post(url(alice), {"name": "greet", "code": V1, "description": "says hello"})
    assert first.status_code == 201, first.get_json()
    assert first.get_json() == {"name": "greet", "version": 1}
    # the same code again is that version: a retried save mints no twin
    again = alice.post(url(alice), {"name": "greet", "code": V1, "description": "says hello"})
    assert again.status_code == 200 and again.get_json() == first.get_json()
    second = alice.post(url(alice), {"name": "greet", "code": V2, "language": "javascript"})
    assert second.status_code == 201 and second.get_json()["version"] == 2
    listed = alice.get(url(alice)).get_json()["items"]
    assert [(f["name"], f["versions"], f["description"]) for f in listed] == [
        ("greet", [2, 1], "")]
    newest = alice.get(url(alice, "/greet")).get_json()
    assert (newest["version"], newest["code"]) == (2, V2)
    assert [v["version"] for v in newest["versions"]] == [2, 1]
    v1 = alice.get(url(alice, "/greet/versions/1")).get_json()
    assert (v1["code"], v1["description"], v1["created_by_job"]) == (V1, "says hello", None)
    assert alice.get(url(alice, "/greet?version=1")).get_json()["code"] == V1
    assert alice.get(url(alice, "/greet/versions/3")).status_code == 404
    assert alice.get(url(alice, "/nope")).status_code == 404
    assert alice.get(url(alice, "/greet?version=x")).status_code == 422
    # and the database itself refuses to change a version
    try:
        pg.execute("UPDATE functions SET code = 'return 1;' WHERE version = 1")
        raise AssertionError("a version was updated")
    except Exception as exc:
        assert "immutable" in str(exc)
    assert alice.get(url(alice, "/greet/versions/1")).get_json()["code"] == V1


def test_a_syntax_error_is_a_422_with_line_and_column_and_nothing_is_written(
        alice: Caller) -> None:  # noqa: F811
    r = alice.post(url(alice), {"name": "bad", "code": "const a = 1;\nconst b = ;\n"})
    assert r.status_code == 422, r.get_json()
    error = r.get_json()["error"]
    assert error["code"] == "invalid_function"
    assert error["details"]["line"] == 2 and error["details"]["column"] >= 1
    assert "line 2" in error["message"]
    for bad in ({"name": "1abc", "code": V1}, {"name": "x", "code": ""},
                {"name": "x", "code": V1, "language": "python"}, {"code": V1}):
        assert alice.post(url(alice), bad).status_code == 422, bad
    assert rows() == 0


@pytest.mark.parametrize(("reason", "code", "line", "says"), [
    ("an ES import", "import { createClient } from '@supabase/supabase-js';\n"
     "export default async function (input) { return 1; }\n", 1,
     "imports are not available: "),
    ("a default import", "const a = 1;\nimport x from 'y';\nreturn x;\n", 2,
     "imports are not available: "),
    ("a require", "const axios = require('axios');\nreturn 1;\n", 1,
     "require() is not available: "),
])
def test_an_import_or_require_is_a_422_naming_its_line_and_nothing_is_written(
        alice: Caller, reason: str, code: str, line: int, says: str) -> None:  # noqa: F811
    r = alice.post(url(alice), {"name": "imp", "code": code})
    assert r.status_code == 422, (reason, r.get_json())
    error = r.get_json()["error"]
    assert error["code"] == "invalid_function"
    assert error["details"]["line"] == line and error["details"]["column"] >= 1
    assert f"line {line}" in error["message"] and says in error["message"], error
    assert "syntax error" not in error["message"] and "Unexpected token" not in error["message"]
    assert error["details"]["problem"].startswith(says)
    assert rows() == 0


def test_commonjs_exports_save_and_run(alice: Caller, worker) -> None:  # noqa: F811
    code = "exports.handler = async (input, tools) => ({hello: input.who});\n"
    saved = alice.post(url(alice), {"name": "cjs", "code": code})
    assert saved.status_code == 201, saved.get_json()
    started = alice.post(url(alice, "/cjs/runs"), {"input": {"who": "Ada"}})
    job = wait_for(started.get_json()["job_id"], timeout=60)
    assert job["status"] == "completed", job["last_error"]
    assert job["result"] == {"output": {"hello": "Ada"}}


def test_runs_are_started_and_listed_with_their_calls(alice: Caller, worker) -> None:  # noqa: F811
    alice.post(url(alice), {"name": "greet", "code": V1})
    alice.post(url(alice), {"name": "greet", "code": "tools.log('hi');\n" + V2})
    started = alice.post(url(alice, "/greet/runs"), {"input": {"who": "Ada"}, "version": 1})
    assert started.status_code == 202, started.get_json()
    job = wait_for(started.get_json()["job_id"], timeout=60)
    assert job["result"] == {"output": {"hello": "Ada"}}
    newest = alice.post(url(alice, "/greet/runs"), {"input": {"who": "Bob"}})
    job = wait_for(newest.get_json()["job_id"], timeout=60)
    assert job["result"] == {"output": {"hi": "Bob"}}
    listed = alice.get(url(alice, "/greet/runs")).get_json()["items"]
    assert [(r["version"], r["status"], r["calls"], r["input"]) for r in listed] == [
        (2, "completed", 1, {"who": "Bob"}), (1, "completed", 0, {"who": "Ada"})]
    steps = alice.get(listed[0]["job_url"]).get_json()["steps"]
    assert [s["name"] for s in steps] == ["load", "call:0:log"]
    assert alice.post(url(alice, "/greet/runs"), {"version": 9}).status_code == 404
    assert alice.post(url(alice, "/nope/runs"), {}).status_code == 404
    assert alice.post(url(alice, "/greet/runs"), {"input": {"a\u0000": 1}}).status_code == 422


def test_another_owners_functions_are_not_found(alice: Caller, bob: Caller) -> None:  # noqa: F811
    alice.post(url(alice), {"name": "mine", "code": V1})
    for path in ("", "/mine", "/mine/versions/1", "/mine/runs"):
        assert bob.get(url(alice, path)).status_code == 404, path
    assert bob.post(url(alice), {"name": "mine", "code": V2}).status_code == 404
    assert bob.post(url(alice, "/mine/runs"), {"input": 1}).status_code == 404
    assert bob.get(url(bob, "/mine")).status_code == 404  # not in bob's own project either
    assert rows() == 1


def test_thirty_hostile_saves_at_once_leave_the_web_answering(alice: Caller) -> None:  # noqa: F811
    # Issue 25.5: code written to break out of the wrapper runs while it is compiled; each
    # check is bounded (0.5 s of CPU), a few at a time, and holds no database connection.
    import threading
    import time

    hostile = "}}); for (;;) {} (async function () {{"  # closes the wrapper's two braces
    answers: list[int] = []

    app = alice.client.application
    auth = alice.headers()

    def save(n: int) -> None:  # a client per thread, as a server has a request per thread
        r = app.test_client().post(url(alice), json={"name": f"evil{n}", "code": hostile},
                                   headers=auth)
        answers.append(r.status_code)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(30)]
    for t in threads:
        t.start()
    slowest = 0.0
    while any(t.is_alive() for t in threads):
        started = time.monotonic()
        r = app.test_client().get("/api/projects", headers=auth)
        slowest = max(slowest, time.monotonic() - started)
        assert r.status_code == 200
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert slowest < 1.0, f"/api/projects took {slowest:.2f} s while the saves were checked"
    # Each save refused, none stored; a busy server says so with Retry-After
    assert len(answers) == 30 and set(answers) <= {422, 503}, answers
    assert rows() == 0


def test_a_machine_that_cannot_fence_the_sandbox_answers_503_saying_how_and_saves_nothing(
        alice: Caller, monkeypatch) -> None:  # noqa: F811
    from tasks.functions import sandbox_pool

    # A machine without bubblewrap (the fences are probed again: none were made yet)
    which = sandbox_pool.shutil.which
    monkeypatch.setattr(sandbox_pool, "_fences", None)
    monkeypatch.setattr(sandbox_pool.shutil, "which",
                        lambda name, *a, **k: None if name == "bwrap" else which(name, *a, **k))
    before = rows()
    r = alice.post(url(alice), {"name": "greet", "code": V1})
    assert r.status_code == 503, r.get_json()
    error = r.get_json()["error"]
    assert error["code"] == "sandbox_unavailable"
    assert "apt-get install -y bubblewrap" in error["message"]
    assert rows() == before
