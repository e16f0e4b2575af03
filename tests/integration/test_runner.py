"""A real worker runs jobs: replay after a failure, retries, permanent failures, determinism."""

from __future__ import annotations

from collections import Counter

import pytest

from tasks.engine import control, pg, runner
from tests.integration.jobdb import (
    job,
    new_job,
    started_steps,
    status_history,
    step_events,
    steps,
    tuples,
    wait_for,
)


def test_retry_replays_completed_steps_and_reruns_only_the_failed_one(worker, project):
    # Given a canary whose last step fails on its first attempt
    job_id = new_job(project, payload={"steps": 4, "fail_first_attempts": 1})

    # When the worker runs it to the end
    row = wait_for(job_id)

    # Then it completed on attempt 2, and only step-4 ran twice
    assert row["status"] == "completed"
    assert row["attempts"] == 2
    assert row["result"] == {"steps": 4, "attempt": 2}
    started = Counter(started_steps(job_id))
    assert started == {"step-1": 1, "step-2": 1, "step-3": 1, "step-4": 2}
    assert step_events(job_id, "failed") == ["step-4"]
    assert [(s["name"], s["status"], s["output"], s["attempts"]) for s in steps(job_id)] == [
        ("step-1", "completed", {"n": 1}, 1), ("step-2", "completed", {"n": 2}, 1),
        ("step-3", "completed", {"n": 3}, 1), ("step-4", "completed", {"n": 4}, 2),
    ]
    assert status_history(job_id) == ["queued", "running", "queued", "running", "completed"]
    assert tuples("SELECT data FROM agent_job_events WHERE job_id = %s AND type = 'status' "
                  "ORDER BY id DESC LIMIT 1", (job_id,)) == [
        ({"status": "completed", "from": "running",
          "step": {"name": "step-4", "seq": 4, "status": "completed"}},)]


def test_retries_exhausted_fail_with_the_last_error(worker, project):
    job_id = new_job(project, payload={"steps": 2, "fail_first_attempts": 10}, max_attempts=2)
    row = wait_for(job_id)
    assert row["status"] == "failed"
    assert row["attempts"] == 2
    assert row["last_error"] == ("RetryableError: canary step-2 failing on purpose "
                                 "(fail_first_attempts)")
    assert row["completed_at"] is not None
    assert status_history(job_id) == ["queued", "running", "queued", "running", "failed"]
    # The feed: each move from running says why, and carries the failed step's outcome
    feed = tuples("SELECT type, data FROM agent_job_events WHERE job_id = %s ORDER BY id",
                  (job_id,))
    failed_step = {"name": "step-2", "seq": 2, "status": "failed"}
    assert feed[-1] == ("status", {"status": "failed", "from": "running",
                                   "reason": row["last_error"], "step": failed_step})
    retry = [d for t, d in feed if t == "status" and d["status"] == "queued" and d["from"]]
    assert retry == [{"status": "queued", "from": "running", "reason": row["last_error"],
                      "step": failed_step}]
    last = steps(job_id)[-1]
    assert (last["status"], last["attempts"]) == ("failed", 2)
    assert "failing on purpose" in last["error"]


def test_permanent_error_fails_after_one_attempt(worker, project):
    job_id = new_job(project, "test.doomed", {"message": "the key is revoked"})
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"] == "PermanentError: the key is revoked"
    assert status_history(job_id) == ["queued", "running", "failed"]


def test_an_unknown_exception_is_retried(worker, project):
    job_id = new_job(project, "test.flaky", {"fail_first_attempts": 2})
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("completed", 3)
    assert row["result"] == {"attempt": 3}
    assert started_steps(job_id) == ["ok"], "the completed step replays, never reruns"


def test_an_unknown_exception_on_the_last_attempt_fails(worker, project):
    job_id = new_job(project, "test.flaky", {"fail_first_attempts": 9}, max_attempts=2)
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("failed", 2)
    assert row["last_error"] == "KeyError: 'attempt 2 trips over a bug'"


def test_a_non_deterministic_handler_fails_with_a_clear_error(worker, project):
    job_id = new_job(project, "test.shifty")
    row = wait_for(job_id)
    assert row["status"] == "failed"
    assert row["attempts"] == 2, "NonDeterministicStep is permanent: no third attempt"
    assert row["last_error"].startswith("NonDeterministicStep: step 1 is 'first-2' in this run "
                                        "but 'first-1' was recorded")
    assert [(s["name"], s["status"]) for s in steps(job_id)] == [("first-1", "completed")]


def test_a_job_past_its_timeout_fails_at_the_next_step_boundary(worker, project):
    job_id = new_job(project, payload={"steps": 20, "step_seconds": 0.3}, timeout_seconds=1)
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"] == "JobTimeout: the job ran past its timeout_seconds"
    done = [s for s in steps(job_id) if s["status"] == "completed"]
    assert 2 <= len(done) <= 5, "stopped about 1s in, between steps"
    assert all(s["status"] == "completed" for s in steps(job_id)), "no step left running"


def test_a_duplicate_delivery_of_a_finished_job_does_nothing(worker, project):
    job_id = new_job(project, payload={"steps": 1})
    wait_for(job_id)
    before = job(job_id)
    assert runner.run_job(str(job_id)) == "skipped"
    assert job(job_id) == before


def test_a_rate_limit_retry_gives_the_attempt_back(worker, project):
    # max_attempts=1, yet two refused calls do not use it up
    job_id = new_job(project, "test.rate_limited", {"times": 2})
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("completed", 1)
    assert row["result"] == {"calls": 3}
    assert steps(job_id)[0]["attempts"] == 3
    assert status_history(job_id) == ["queued", "running", "queued", "running", "queued",
                                      "running", "completed"]


def test_a_manual_retry_of_a_failed_job_runs_it_again_from_its_last_step(worker, project,
                                                                          tmp_path):
    # Given a job that failed permanently because its gate was closed
    gate = tmp_path / "gate"
    job_id = new_job(project, "test.gated", {"gate": str(gate)})
    assert wait_for(job_id)["status"] == "failed"

    # When the cause is fixed and someone retries it by hand
    gate.touch()
    assert control.retry_failed(job_id)

    # Then it runs again with fresh attempts, replaying the step that had completed
    row = wait_for(job_id)
    assert (row["status"], row["attempts"], row["result"]) == ("completed", 1, {"gate": "open"})
    assert Counter(started_steps(job_id)) == {"before": 1, "gate": 2}
    assert status_history(job_id) == ["queued", "running", "failed", "queued", "running",
                                      "completed"]
    assert not control.retry_failed(job_id), "only a failed job can be retried"


def test_a_job_whose_type_is_gone_fails_permanently(project):
    job_id = new_job(project, payload={"steps": 1}, publish=False)
    pg.execute("UPDATE agent_jobs SET job_type = 'gone.away' WHERE id = %s", (job_id,))
    assert runner.run_job(str(job_id)) == "failed"
    row = job(job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"] == "UnknownJobType: unknown job_type 'gone.away'"


def test_a_stored_payload_that_no_longer_validates_fails_permanently(project):
    job_id = new_job(project, payload={"steps": 1}, publish=False)
    pg.execute("UPDATE agent_jobs SET payload = '{\"steps\": -1}' WHERE id = %s", (job_id,))
    assert runner.run_job(str(job_id)) == "failed"
    assert job(job_id)["last_error"].startswith("InvalidPayload: invalid payload for "
                                                "system.canary: steps:")


def test_a_result_that_is_not_json_fails_the_job(project):
    job_id = new_job(project, "test.unserialisable", publish=False)
    assert runner.run_job(str(job_id)) == "failed"
    row = job(job_id)
    assert row["attempts"] == 1 and row["result"] is None
    assert row["last_error"].startswith("PermanentError: the handler's result is not "
                                        "JSON-serialisable")


def test_a_slow_first_step_shows_as_started_while_it_runs(worker, project):
    """The first step's start is deferred to save a write, but not hidden while it runs."""
    from tests.conftest import wait_until

    job_id = new_job(project, payload={"steps": 2, "step_seconds": 0.8})
    wait_until(lambda: [(s["name"], s["status"]) for s in steps(job_id)] == [("step-1",
                                                                             "running")],
               timeout=5, what="step-1 to show as running")
    assert step_events(job_id) == ["step-1"]
    wait_for(job_id)
    assert [(s["name"], s["status"], s["attempts"]) for s in steps(job_id)] == [
        ("step-1", "completed", 1), ("step-2", "completed", 1)]
    assert started_steps(job_id) == ["step-1", "step-2"]
    assert step_events(job_id, "completed") == ["step-1", "step-2"]


def test_a_fast_first_step_writes_its_start_with_its_outcome(worker, project):
    job_id = new_job(project, payload={"steps": 1})
    wait_for(job_id)
    assert step_events(job_id) == ["step-1"], "one outcome, carried by the job's move"
    assert step_events(job_id, "completed") == ["step-1"]
    step = steps(job_id)[0]
    assert step["started_at"] <= step["finished_at"] and step["attempts"] == 1


def test_a_fast_step_owes_one_event_and_its_outcome_names_the_next(worker, project):
    # Issue 26: a 3-step canary writes 5 event rows, not 9 (queued, running, two outcomes,
    # and the job's `completed` carrying the last step's outcome): a fast step announces no
    # start of its own, and the last one's outcome rides on the job's move
    job_id = new_job(project, payload={"steps": 3})
    wait_for(job_id)
    rows = tuples("SELECT type, data FROM agent_job_events WHERE job_id = %s ORDER BY id",
                  (job_id,))
    kinds = [(t, d.get("status")) for t, d in rows]
    assert kinds == [("status", "queued"), ("status", "running"), ("step", "completed"),
                     ("step", "completed"), ("status", "completed")]
    assert [d.get("next") for t, d in rows if t == "step"] == [
        {"seq": 2, "name": "step-2"}, {"seq": 3, "name": "step-3"}]
    assert rows[-1][1]["step"] == {"name": "step-3", "seq": 3, "status": "completed"}
    assert step_events(job_id) == ["step-1", "step-2", "step-3"]
    assert [(s["name"], s["attempts"]) for s in steps(job_id)] == [
        ("step-1", 1), ("step-2", 1), ("step-3", 1)]


def test_the_step_durations_count_a_last_step_whose_outcome_rides_on_the_jobs_move(
        worker, project):
    # Given a job of one step: its outcome is in the job's `completed` event, not a `step` one
    job_id = new_job(project, "test.one_step", {})
    wait_for(job_id)
    assert step_events(job_id) == ["only"]
    # Then /metrics' step durations still see it
    from app.ops import metrics
    assert "test.one_step" in [t for t, _, _ in metrics.read_database().step_quantiles]


def test_a_slow_later_step_is_announced_while_it_runs(worker, project):
    from tests.conftest import wait_until

    job_id = new_job(project, payload={"steps": 2, "step_seconds": 0.6})
    wait_until(lambda: "step-2" in step_events(job_id, "started"), timeout=5,
               what="step-2's start announced")
    wait_for(job_id)
    assert step_events(job_id) == ["step-1", "step-1", "step-2", "step-2"]
    assert step_events(job_id, "started") == ["step-1", "step-2"]


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        pytest.param("nan", "NaN is not JSON, though json.dumps writes it", id="nan"),
        pytest.param("nul", "jsonb cannot hold \\u0000", id="nul"),
    ],
)
def test_a_step_output_postgres_cannot_store_fails_the_job_cleanly(worker, project, kind, why):
    job_id = new_job(project, "test.odd_output", {"kind": kind})
    row = wait_for(job_id, timeout=5)
    assert (row["status"], row["attempts"]) == ("failed", 1), why
    assert "the output of step 'odd'" in row["last_error"]
    assert [(s["name"], s["status"]) for s in steps(job_id)] == [("odd", "failed")]


def test_an_error_message_with_a_nul_byte_is_stored_escaped(worker, project):
    job_id = new_job(project, "test.odd_output", {"kind": "nul_error"})
    row = wait_for(job_id, timeout=5)
    assert (row["status"], row["last_error"]) == ("failed", "PermanentError: bad\\x00byte")
    assert steps(job_id)[0]["error"] == "PermanentError: bad\\x00byte"


def test_a_lost_database_connection_says_so_without_the_databases_address(worker, project):
    # Given a job whose own statement loses its connection on the first attempt
    job_id = new_job(project, "test.loses_database", {})
    row = wait_for(job_id)
    # Then it was retried at no cost, and what the tenant reads names no host or port
    assert row["status"] == "completed", row["last_error"]
    errors = [r[0] for r in tuples("SELECT error FROM job_steps WHERE job_id = %s "
                                   "UNION ALL SELECT last_error FROM agent_jobs WHERE id = %s "
                                   "UNION ALL SELECT data::text FROM agent_job_events "
                                   "WHERE job_id = %s", (job_id, job_id, job_id)) if r[0]]
    assert any("database connection lost" in e for e in errors), errors
    assert not any("127.0.0.1" in e or "port" in e for e in errors), errors



def test_a_tree_stops_growing_at_its_ceiling_of_descendants(worker, project, monkeypatch):
    from tasks.settings import get_settings

    # Given an operator who allows 5 descendants per root job
    monkeypatch.setenv("SWITCHYARD_MAX_DESCENDANTS", "5")
    get_settings.cache_clear()
    try:
        # When a job asks for 8 children
        job_id = new_job(project, "test.fan_out", {"children": 8}, max_attempts=1)
        row = wait_for(job_id)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    # Then 5 were created, and the parent failed saying why
    assert row["status"] == "failed"
    assert "SWITCHYARD_MAX_DESCENDANTS" in row["last_error"]
    assert tuples("SELECT count(*) FROM agent_jobs WHERE parent_job_id = %s", (job_id,)) == [(5,)]
