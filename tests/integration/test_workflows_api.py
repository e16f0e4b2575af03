"""Workflow definitions over HTTP: saved as immutable versions, every problem a 422 that
names it and writes nothing, another owner's workflows not found."""

from __future__ import annotations

import threading

from tasks.engine import pg
from tests.integration.test_api_contract import Caller, alice, bob, client  # noqa: F401

STEPS = [
    {"name": "fetch", "job_type": "system.canary", "payload": {"steps": 1}},
    {"name": "report", "job_type": "system.canary", "depends_on": ["fetch"],
     "payload": {"steps": "{{steps.fetch.output.steps}}"},
     "condition": "steps.fetch.output.steps >= 1 and inputs.go == true"},
]


def url(caller: Caller) -> str:
    return f"/api/projects/{caller.project}/workflows"


def rows() -> int:
    return int(pg.fetch_value("SELECT count(*) FROM workflows"))


def test_each_save_of_a_name_is_a_new_immutable_version(alice: Caller) -> None:  # noqa: F811
    first = alice.post(url(alice), {"name": "nightly", "steps": STEPS})
    assert first.status_code == 201, first.get_json()
    assert first.get_json()["version"] == 1
    # the same spec again is that version (a retried save mints no twin)
    again = alice.post(url(alice), {"name": "nightly", "steps": STEPS})
    assert again.status_code == 200 and again.get_json() == first.get_json()
    changed = [*STEPS[:1], {**STEPS[1], "on_failure": "continue"}]
    second = alice.post(url(alice), {"name": "nightly", "steps": changed})
    assert second.status_code == 201 and second.get_json()["version"] == 2
    # version 1 is still what it was
    v1 = alice.get(f"/api/workflows/{first.get_json()['id']}").get_json()
    assert v1["version"] == 1 and v1["spec"]["steps"][1]["on_failure"] == "stop"
    listed = alice.get(url(alice)).get_json()["items"]
    assert [(w["name"], w["versions"], w["latest_id"]) for w in listed] == [
        ("nightly", [2, 1], second.get_json()["id"])]
    # any version of the name, reached from the newest's id (what a listing gives)
    latest = second.get_json()["id"]
    by_version = alice.get(f"/api/workflows/{latest}?version=1").get_json()
    assert by_version["id"] == first.get_json()["id"] and by_version["version"] == 1
    assert alice.get(f"/api/workflows/{latest}?version=3").status_code == 422
    assert alice.get(f"/api/workflows/{latest}?version=x").status_code == 422


def test_every_problem_is_named_and_nothing_is_written(alice: Caller) -> None:  # noqa: F811
    bad = {"name": "broken", "steps": [
        {"name": "a", "job_type": "system.canary", "depends_on": ["c"]},
        {"name": "b", "job_type": "approval.execute", "depends_on": ["a"]},
        {"name": "c", "job_type": "system.canary", "depends_on": ["b"],
         "payload": {"x": "{{steps.d.output}}"}},
        {"name": "d", "job_type": "no.such_type", "condition": "1 +"},
        {"name": "a", "job_type": "system.canary"},
    ]}
    r = alice.post(url(alice), bad)
    assert r.status_code == 422, r.get_json()
    error = r.get_json()["error"]
    assert error["code"] == "invalid_workflow"
    text = "\n".join(error["details"]["problems"])
    for expected in ("a → ", "approval.execute", "no.such_type", "not upstream",
                     "used by steps #1, #5", "column"):
        assert expected in text, (expected, text)
    assert rows() == 0


def test_a_payload_its_job_type_refuses_is_refused_at_save(alice: Caller) -> None:  # noqa: F811
    # Without a template it runs as it stands: refused now, not failed at every run
    bad = {"name": "typo", "steps": [
        {"name": "a", "job_type": "system.canary", "payload": {"steps": "many"}},
        {"name": "b", "job_type": "system.canary", "payload": {"stepz": 1}},
        {"name": "c", "job_type": "system.canary", "payload": {"steps": "{{inputs.n}}"}},
    ]}
    r = alice.post(url(alice), bad)
    assert r.status_code == 422, r.get_json()
    problems = r.get_json()["error"]["details"]["problems"]
    assert [p.split(":")[0] for p in problems] == ["step 'a'", "step 'b'"], problems
    assert "steps" in problems[0] and "stepz" in problems[1]
    assert rows() == 0
    # a template's value is known at run time only: that step is taken
    r = alice.post(url(alice), {"name": "typo", "steps": bad["steps"][2:]})
    assert r.status_code == 201, r.get_json()


def test_another_owners_workflow_is_not_found(alice: Caller, bob: Caller) -> None:  # noqa: F811
    saved = alice.post(url(alice), {"name": "mine", "steps": STEPS[:1]}).get_json()
    assert bob.get(f"/api/workflows/{saved['id']}").status_code == 404
    assert bob.post(url(alice), {"name": "x", "steps": STEPS[:1]}).status_code == 404
    assert bob.get(url(alice)).status_code == 404
    assert alice.get("/api/workflows/not-a-uuid").status_code == 404


def test_concurrent_saves_of_one_name_get_distinct_versions(alice: Caller) -> None:  # noqa: F811
    from tasks.workflows import store
    from tasks.workflows.spec import WorkflowSpec

    versions: list[int] = []

    def save(i: int) -> None:
        spec = WorkflowSpec.model_validate({"name": "raced", "steps": [
            {"name": "only", "job_type": "system.canary", "payload": {"n": i}}]})
        versions.append(store.save(alice.project, spec).version)
        pg.reset()

    threads = [threading.Thread(target=save, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(versions) == [1, 2, 3, 4, 5, 6]
