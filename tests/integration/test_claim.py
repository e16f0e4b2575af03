"""The claim compare-and-set: one winner per job, however many workers race for it."""

from __future__ import annotations

from tasks.engine import pg, store
from tests.integration.jobdb import in_threads, job, new_job, status_history


def test_two_workers_racing_for_one_job_exactly_one_wins(project):
    # Repeated, because one lucky interleaving proves little.
    for _ in range(20):
        job_id = new_job(project, payload={"steps": 1}, publish=False)

        got = in_threads(2, lambda i, job_id=job_id: store.claim(job_id, f"racer-{i}:1"))

        winners = [(i, c) for i, c in enumerate(got) if c is not None]
        assert len(winners) == 1, got
        i, claimed = winners[0]
        row = job(job_id)
        assert (row["status"], row["attempts"], row["locked_by"]) == ("running", 1,
                                                                      f"racer-{i}:1")
        assert claimed.attempt == 1 and claimed.steps == ()
        assert status_history(job_id) == ["queued", "running"]


def test_sixteen_claimers_one_winner(project):
    job_id = new_job(project, publish=False)
    got = in_threads(16, lambda i: store.claim(job_id, f"racer-{i}:1"))
    assert sum(c is not None for c in got) == 1
    assert job(job_id)["attempts"] == 1


def test_claim_returns_recorded_steps_for_replay(project):
    job_id = new_job(project, publish=False)
    pg.execute("INSERT INTO job_steps (job_id, seq, name, status, output) VALUES "
               "(%(id)s, 2, 'b', 'failed', NULL), (%(id)s, 1, 'a', 'completed', '{\"x\": 1}')",
               {"id": job_id})
    claimed = store.claim(job_id, "w:1")
    assert claimed is not None
    assert claimed.steps == (store.RecordedStep("a", "completed", {"x": 1}),
                             store.RecordedStep("b", "failed", None))


def test_claim_refuses_jobs_that_are_not_claimable(project):
    early = new_job(project, publish=False)
    pg.execute("UPDATE agent_jobs SET run_after = now() + interval '1 hour' WHERE id = %s",
               (early,))
    canceled = new_job(project, publish=False)
    pg.execute("UPDATE agent_jobs SET status = 'canceled' WHERE id = %s", (canceled,))
    running = new_job(project, publish=False)
    assert store.claim(running, "w:1") is not None

    assert store.claim(early, "w:2") is None, "run_after in the future"
    assert store.claim(canceled, "w:2") is None, "a stale delivery of a canceled job"
    assert store.claim(running, "w:2") is None, "a duplicate delivery"
    assert job(running)["locked_by"] == "w:1" and job(running)["attempts"] == 1


def test_a_delivery_that_claims_nothing_says_why_in_one_statement(project, monkeypatch):
    # Given an early job, a running one, and a job that does not exist
    early = new_job(project, publish=False, priority=7)
    pg.execute("UPDATE agent_jobs SET run_after = now() + interval '1 hour' WHERE id = %s",
               (early,))
    running = new_job(project, publish=False)
    assert store.claim(running, "w:1") is not None
    statements: list[str] = []
    real = pg.persist_one
    monkeypatch.setattr(pg, "persist_one", lambda sql, *a, **k: statements.append(sql)
                        or real(sql, *a, **k))
    # When each is delivered
    why_early = store.claim_or_why(early, "w:2")
    why_running = store.claim_or_why(running, "w:2")
    why_gone = store.claim_or_why("00000000-0000-0000-0000-000000000000", "w:2")
    # Then each answer came from the claim statement alone, and says what the runner needs
    assert len(statements) == 3
    assert isinstance(why_early, store.NotClaimed) and why_early.early
    assert (why_early.queue, why_early.priority) == ("default", 7)
    assert 3500 < why_early.due_in <= 3600
    assert isinstance(why_running, store.NotClaimed) and not why_running.early
    assert why_running.status == "running"
    assert why_gone == store.NotClaimed()


def test_concurrency_key_limits_claims_under_a_race(project):
    # Given 8 queued jobs sharing a key with a limit of 3
    ids = [new_job(project, publish=False, concurrency_key="tenant:1", concurrency_limit=3)
           for _ in range(8)]

    # When 8 workers each try to claim a different one at the same moment
    got = in_threads(8, lambda i: store.claim(ids[i], f"w-{i}:1"))

    # Then exactly 3 run and the rest stay queued
    assert sum(c is not None for c in got) == 3
    statuses = sorted(job(i)["status"] for i in ids)
    assert statuses == ["queued"] * 5 + ["running"] * 3
