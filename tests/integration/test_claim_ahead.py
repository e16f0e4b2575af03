"""Claim ahead (tasks.engine.claim_ahead): a threads-pool worker claims the wake-ups it holds
in one statement, and gives back, fenced by each claim's token, what it did not start.
(The session's worker prefetches nothing beyond its threads: tests/e2e/test_claim_ahead.py
runs a burst through a real `celery worker`.)"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tasks.engine import claim_ahead, pg, store
from tests.integration.jobdb import job, new_job, status_history, tuples, wait_for


@pytest.fixture
def ahead(settings_env) -> None:
    """Claim ahead on (it is off by default) in this process, the session worker's."""
    settings_env(SWITCHYARD_CLAIM_AHEAD="16")


def test_many_jobs_are_claimed_in_one_statement_and_a_replay_returns_the_same_claims(project):
    # Given three due jobs whose wake-ups are not sent
    ids = [str(new_job(project, payload={"steps": 1}, publish=False)) for _ in range(3)]
    tokens = [uuid.uuid4() for _ in ids]
    params = {"ids": ids, "tokens": tokens, "worker": "w-ahead"}

    # When one statement claims them all, and runs again (a retry after a lost connection)
    first = pg.fetch_dicts(store.CLAIM_MANY, params)
    again = pg.fetch_dicts(store.CLAIM_MANY, params)

    # Then each is running under its own token, claimed once: one attempt, one event
    assert sorted(str(r["id"]) for r in first) == sorted(ids)
    assert {str(r["id"]): r["token"] for r in again} == {str(r["id"]): r["token"] for r in first}
    for job_id, token in zip(ids, tokens, strict=True):
        row = job(job_id)
        assert (row["status"], row["attempts"], row["claim_token"]) == ("running", 1, token)
        assert status_history(job_id) == ["queued", "running"]


def test_a_keyed_a_future_or_a_claimed_job_is_not_claimed_ahead(project):
    keyed = new_job(project, payload={"steps": 1}, publish=False, concurrency_key="k-ahead")
    later = new_job(project, payload={"steps": 1}, publish=False,
                    run_after=datetime.now(UTC) + timedelta(hours=1))
    taken = new_job(project, payload={"steps": 1}, publish=False)
    assert store.claim(taken, "someone-else") is not None

    ids = [str(keyed), str(later), str(taken)]
    assert store.claim_many(ids, [uuid.uuid4() for _ in ids], "w-ahead") == {}
    assert job(taken)["attempts"] == 1 and job(keyed)["status"] == "queued"


def test_a_claim_made_ahead_and_not_started_goes_back_fenced_by_its_token(project):
    # Given two jobs claimed ahead
    a, b = (str(new_job(project, payload={"steps": 1}, publish=False)) for _ in range(2))
    claims = store.claim_many([a, b], [uuid.uuid4(), uuid.uuid4()], "w-ahead")
    pairs = [(job_id, c.token) for job_id, c in claims.items()]
    # ... of which b's run has written since (it started)
    pg.execute("UPDATE agent_jobs SET write_seq = 1 WHERE id = %s", (b,))

    # When both are handed back, twice
    assert [m.id for m in store.hand_back(pairs)] == [uuid.UUID(a)]
    assert store.hand_back(pairs) == []

    # Then only the one never started is queued again, its attempt given back, saying why
    assert (job(a)["status"], job(a)["attempts"]) == ("queued", 0)
    assert job(b)["status"] == "running"
    reason = tuples("SELECT data->>'reason' FROM agent_job_events WHERE job_id = %s "
                    "AND type = 'status' ORDER BY id DESC LIMIT 1", (a,))
    assert reason == [("claimed ahead, not started in time",)]


def test_a_worker_hands_back_a_held_claim_in_time_and_the_job_runs_again(worker, project):
    # Given a job this process claimed ahead whose wake-up never starts (held 10 s already)
    job_id = str(new_job(project, payload={"steps": 1}, publish=False))
    claim_ahead.hold(store.claim_many([job_id], [uuid.uuid4()], "w-ahead").values(),
                     time.monotonic() - 10)

    # Then the hand-back thread gives it back within a check or two, with a fresh wake-up:
    # it runs once, on its first attempt
    row = wait_for(job_id, timeout=10)
    assert (row["status"], row["attempts"]) == ("completed", 1)
    assert claim_ahead.held_count() == 0
    assert status_history(job_id) == ["queued", "running", "queued", "running", "completed"]


class _Delivery:
    """A wake-up as Celery's worker state holds it: reserved, not started."""

    name = claim_ahead.RUN_JOB

    def __init__(self, job_id: str) -> None:
        self.args = [job_id]


def test_a_delivery_whose_job_is_being_claimed_ahead_waits_and_takes_that_claim(
        project, ahead, monkeypatch):
    from celery.worker import state

    # Given a threads worker that ended runs lately, holding c's and d's wake-ups unstarted,
    # and a delivery of a whose claim also claims them ahead, cut between commit and return
    a, c, d = (str(new_job(project, payload={"steps": 1}, publish=False)) for _ in range(3))
    held = [_Delivery(c), _Delivery(d)]  # (claim ahead takes at least two at once)
    for n, delivery in enumerate(held):
        monkeypatch.setitem(state.requests, f"delivery-{n}", delivery)
        state.reserved_requests.add(delivery)
    monkeypatch.setitem(claim_ahead._enabled, "on", True)
    for _ in range(3):
        claim_ahead.ended()
    committed, go_on = threading.Event(), threading.Event()
    real = store.claim_many

    def slow_claim_many(ids, tokens, worker):
        claims = real(ids, tokens, worker)
        committed.set()
        go_on.wait(10)
        return claims

    monkeypatch.setattr(store, "claim_many", slow_claim_many)
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.update(a=claim_ahead.claim(a, "w-ahead")))
    first.start()
    assert committed.wait(10)

    # When c's delivery starts meanwhile (its claim committed, not yet held here)
    state.reserved_requests.discard(held[0])
    second = threading.Thread(target=lambda: results.update(c=claim_ahead.claim(c, "w-ahead")))
    second.start()
    time.sleep(0.3)
    go_on.set()
    first.join(10)
    second.join(10)

    # Then c's delivery waited, and runs on the claim made ahead: claimed once, not skipped
    assert isinstance(results["a"], store.ClaimedJob) and isinstance(results["c"], store.ClaimedJob)
    assert results["c"].token == job(c)["claim_token"]
    assert job(c)["attempts"] == 1 and status_history(c) == ["queued", "running"]
    claim_ahead.hand_back_stale(older_than=0)  # d's delivery never comes: given back
    assert given_back(d)


def test_a_claim_whose_answer_was_lost_is_given_back(project, ahead, monkeypatch):
    from celery.worker import state

    # Given a delivery of a whose claim also claims b and c ahead, and whose statement
    # commits but never answers (the database went away, past the retry time)
    a, b, c = (str(new_job(project, payload={"steps": 1}, publish=False)) for _ in range(3))
    for n, job_id in enumerate((b, c)):
        delivery = _Delivery(job_id)
        monkeypatch.setitem(state.requests, f"lost-{n}", delivery)
        state.reserved_requests.add(delivery)
    monkeypatch.setitem(claim_ahead._enabled, "on", True)
    for _ in range(3):
        claim_ahead.ended()
    real = store.claim_many

    def lost(ids, tokens, worker):
        real(ids, tokens, worker)
        raise pg.DatabaseUnavailable("the answer was lost")

    monkeypatch.setattr(store, "claim_many", lost)
    with pytest.raises(pg.DatabaseUnavailable):
        claim_ahead.claim(a, "w-ahead")
    assert {job(j)["status"] for j in (a, b, c)} == {"running"}

    # When the hand-back runs, then every job it claimed is given back with its attempt
    # (and a fresh wake-up: a worker may run it at once)
    claim_ahead.hand_back_stale()
    assert all(given_back(job_id) for job_id in (a, b, c))


def given_back(job_id: str) -> bool:
    """The job went running -> queued for a claim made ahead, its attempt given back."""
    rows = tuples("SELECT data->>'status', data->>'reason' FROM agent_job_events "
                  "WHERE job_id = %s AND type = 'status' ORDER BY id", (job_id,))
    return rows[:3] == [("queued", None), ("running", None), ("queued", store.HANDED_BACK)]


def test_claim_ahead_is_off_by_default(worker, project):
    before = claim_ahead.counts["ahead"]
    ids = [new_job(project, payload={"steps": 1}, publish=False) for _ in range(60)]
    from tasks.engine.dispatch import dispatch_many
    dispatch_many([(i, "default", 5) for i in ids])
    for job_id in ids:
        wait_for(job_id, timeout=60)
    assert claim_ahead.counts["ahead"] == before
