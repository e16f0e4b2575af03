"""Concurrency keys: at most N running jobs per key, and every queued one still runs."""

from __future__ import annotations

from tasks.engine import pg
from tests.integration.jobdb import job, new_job, sample_while, tuple_row, tuples


def _running(key: str) -> int:
    return tuple_row("SELECT count(*) FROM agent_jobs WHERE concurrency_key = %s "
                     "AND status = 'running'", (key,))[0]


def _all_done(ids) -> bool:
    return tuple_row("SELECT count(*) FROM agent_jobs WHERE id = ANY(%s) "
                     "AND status NOT IN ('completed', 'failed', 'canceled')",
                     ([str(i) for i in ids],))[0] == 0


def _event_ids(ids, status: str) -> list[int]:
    rows = tuples("SELECT id FROM agent_job_events WHERE job_id = ANY(%s) AND type = 'status' "
                  "AND message = %s ORDER BY id", ([str(i) for i in ids], status))
    return [r[0] for r in rows]


def test_never_more_than_the_limit_running_and_all_complete(worker, project):
    # Given six slow canaries sharing a key with a limit of two (no sweep runs here:
    # every wake-up must come from the engine itself)
    ids = [new_job(project, payload={"steps": 2, "step_seconds": 0.15},
                   concurrency_key="k", concurrency_limit=2) for _ in range(6)]

    # When the worker (4 threads) runs them, sampling the table all along
    samples = sample_while(lambda: _all_done(ids), lambda: _running("k"), timeout=20)

    # Then no sample saw more than two running, the limit was used, and all completed
    assert max(samples) == 2, samples
    assert [job(i)["status"] for i in ids] == ["completed"] * 6
    # The feed says the same exactly: the k-th claim (k >= 2, from 0) came after the
    # (k-2)-th completion. Event ids are taken in statement order, and a claim only
    # counts a slot as free once the finish that freed it has committed.
    claims = _event_ids(ids, "running")
    finishes = _event_ids(ids, "completed")
    assert len(claims) == len(finishes) == 6
    for k in range(2, 6):
        assert claims[k] > finishes[k - 2], (k, claims, finishes)


def test_two_slots_freed_at_once_wake_two_jobs(worker, project):
    """Both running jobs finish together: each completion must wake a *different* waiter."""
    for round_ in range(3):
        key = f"pair:{round_}"
        ids = [new_job(project, payload={"steps": 1, "step_seconds": 0.3},
                       concurrency_key=key, concurrency_limit=2) for _ in range(4)]
        sample_while(lambda ids=ids: _all_done(ids), lambda key=key: _running(key), timeout=10)
        assert [job(i)["status"] for i in ids] == ["completed"] * 4


def test_keys_do_not_limit_each_other(worker, project):
    ids = [new_job(project, payload={"steps": 1, "step_seconds": 0.4},
                   concurrency_key=f"own:{n}", concurrency_limit=1) for n in range(3)]
    seen = sample_while(lambda: _all_done(ids), lambda: sum(_running(f"own:{n}")
                                                             for n in range(3)))
    assert max(seen) == 3, "three keys with a limit of one each run side by side"


def test_every_freed_slot_wakes_a_distinct_waiter(project, monkeypatch):
    """Two slots free up before either woken job is claimed: both waiters must be woken.

    Publishing is recorded instead of sent, so no worker can claim in between.
    """
    from tasks.engine import control, store

    woken: list[str] = []
    monkeypatch.setattr(control, "dispatch_quietly", lambda job_id, *_: woken.append(str(job_id)))
    # Given A and B running under a key with a limit of two, C and D queued behind them
    a, b, c, d = (new_job(project, publish=False, concurrency_key="k", concurrency_limit=2)
                  for _ in range(4))
    assert store.claim(a, "w:1") and store.claim(b, "w:2")
    assert store.claim(c, "w:3") is None, "over the limit"

    # When both finish and each wakes the next job for the key
    pg.execute("UPDATE agent_jobs SET status = 'completed' WHERE id = ANY(%s)", ([a, b],))
    control.wake_next_for_key("k")
    control.wake_next_for_key("k")

    # Then C and D were both woken (a duplicate wake-up is harmless: its claim is a no-op)
    assert set(woken) == {str(c), str(d)}, woken
