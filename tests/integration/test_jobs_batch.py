"""POST /api/projects/<pid>/jobs:batch (issue 26): many jobs in one request, one statement
and one publishing connection; each item checked on its own, its key honoured."""

from __future__ import annotations

import pytest

from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue_many
from tests.conftest import in_process_worker_paused, wait_until
from tests.integration import test_api_contract as contract
from tests.integration.jobdb import tuple_row
from tests.integration.test_api_contract import FUTURE, assert_error, counts

# The contract's callers (each a token, an owner and a project of its own).
client, alice, bob = contract.client, contract.alice, contract.bob

BATCH = "/api/projects/{pid}/jobs:batch"


def test_a_batch_creates_every_valid_job_and_answers_each_item_in_order(alice, worker):
    jobs = [{"job_type": "system.canary", "payload": {"steps": 1}} for _ in range(5)]
    jobs.insert(2, {"job_type": "no.such.type"})
    jobs.insert(4, {"job_type": "system.canary", "payload": {"steps": 0}})
    jobs.insert(5, {"job_type": "system.canary", "priority": 42})
    r = alice.post(BATCH.format(pid=alice.project), {"jobs": jobs})
    assert r.status_code == 207, r.get_json()
    items = r.get_json()["items"]
    assert [i["status"] for i in items] == [202, 202, 422, 202, 422, 422, 202, 202]
    assert items[2]["error"]["code"] == "unknown_job_type"
    assert items[4]["error"]["code"] == "invalid_payload"
    assert "priority" in items[5]["error"]["message"]
    ids = [i["job_id"] for i in items if i["status"] == 202]
    assert len(set(ids)) == 5
    # Every created job has its queued event and runs
    wait_until(lambda: tuple_row("SELECT count(*) FROM agent_jobs WHERE id = ANY(%s::uuid[]) "
                                 "AND status = 'completed'", (ids,))[0] == 5, timeout=20,
               what="the batch's jobs completed")
    assert tuple_row("SELECT count(*) FROM agent_job_events WHERE job_id = ANY(%s::uuid[]) "
                     "AND type = 'status' AND data->>'status' = 'queued'", (ids,))[0] == 5


def test_idempotency_keys_are_honoured_within_a_batch_and_across_batches(alice):
    url = BATCH.format(pid=alice.project)
    first = alice.post(url, {"jobs": [
        {"job_type": "system.canary", "idempotency_key": "a", "run_after": FUTURE},
        {"job_type": "system.canary", "idempotency_key": "a", "run_after": FUTURE},
        {"job_type": "system.canary", "idempotency_key": "b", "run_after": FUTURE}]}).get_json()
    a, again, b = first["items"]
    assert (a["status"], again["status"], b["status"]) == (202, 200, 202)
    assert again["job_id"] == a["job_id"] and again["created"] is False
    second = alice.post(url, {"jobs": [
        {"job_type": "system.canary", "idempotency_key": "b", "run_after": FUTURE},
        {"job_type": "system.canary", "idempotency_key": "c", "run_after": FUTURE}]}).get_json()
    assert [i["status"] for i in second["items"]] == [200, 202]
    assert second["items"][0]["job_id"] == b["job_id"]
    assert tuple_row("SELECT count(*) FROM agent_jobs WHERE project_id = %s",
                     (alice.project,))[0] == 3


@pytest.mark.parametrize(("body", "words"), [
    ({"jobs": []}, ("jobs",)),
    ({"jobs": [{"job_type": "system.canary"}] * 1001}, ("jobs", "1000")),
    ({"jobs": {"job_type": "system.canary"}}, ("jobs",)),
    ({}, ("jobs",)),
])
def test_a_batch_that_is_not_a_list_of_1_to_1000_jobs_is_refused_and_writes_nothing(
        alice, body, words):
    before = counts()
    assert_error(alice.post(BATCH.format(pid=alice.project), body), 422, "validation_error",
                 *words)
    assert counts() == before


def test_a_batch_into_another_owners_project_is_a_404_and_writes_nothing(alice, bob):
    before = counts()
    r = bob.post(BATCH.format(pid=alice.project), {"jobs": [{"job_type": "system.canary"}]})
    assert_error(r, 404, "not_found")
    assert counts() == before


def test_the_batch_respects_the_owners_fair_share(alice):
    # 16 places (SWITCHYARD_OWNER_MAX_ACTIVE): 3 already held, so 13 of 20 go out now (no
    # worker takes any meanwhile: an ending job would free its place)
    with in_process_worker_paused():
        for _ in range(3):
            alice.job()
        r = alice.post(BATCH.format(pid=alice.project),
                       {"jobs": [{"job_type": "system.canary"} for _ in range(20)]})
        ids = [i["job_id"] for i in r.get_json()["items"]]
        published = tuple_row("SELECT count(*) FROM agent_jobs WHERE id = ANY(%s::uuid[]) "
                              "AND dispatched_at IS NOT NULL", (ids,))[0]
    assert published == 13


def test_enqueue_many_serves_internal_fan_out_across_projects(alice, bob):
    reqs = [EnqueueRequest(project_id=p, job_type="system.canary", run_after=None,
                           idempotency_key=f"fan:{n}")
            for n, p in enumerate([alice.project, bob.project, alice.project])]
    reqs.append(EnqueueRequest(project_id=alice.project, job_type="system.canary",
                               payload={"steps": -1}))
    out = enqueue_many(reqs)
    assert [type(o).__name__ for o in out] == ["Enqueued", "Enqueued", "Enqueued",
                                               "InvalidPayload"]
    rows = pg.fetch_dicts("SELECT project_id::text AS p, idempotency_key AS k FROM agent_jobs "
                          "WHERE idempotency_key LIKE 'fan:%%' ORDER BY 2")
    assert [(r["p"], r["k"]) for r in rows] == [(alice.project, "fan:0"), (bob.project, "fan:1"),
                                                (alice.project, "fan:2")]
