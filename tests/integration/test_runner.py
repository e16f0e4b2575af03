"""A real worker runs jobs: replay after a failure, retries, permanent failures, determinism."""

from __future__ import annotations

from collections import Counter

from tests.integration.jobdb import job, new_job, status_history, step_events, steps, wait_for


def test_retry_replays_completed_steps_and_reruns_only_the_failed_one(worker, project):
    # Given a canary whose last step fails on its first attempt
    job_id = new_job(project, payload={"steps": 4, "fail_first_attempts": 1})

    # When the worker runs it to the end
    row = wait_for(job_id)

    # Then it completed on attempt 2, and only step-4 ran twice
    assert row["status"] == "completed"
    assert row["attempts"] == 2
    assert row["result"] == {"steps": 4, "attempt": 2}
    started = Counter(step_events(job_id, "started"))
    assert started == {"step-1": 1, "step-2": 1, "step-3": 1, "step-4": 2}
    assert step_events(job_id, "failed") == ["step-4"]
    assert [(s["name"], s["status"], s["output"], s["attempts"]) for s in steps(job_id)] == [
        ("step-1", "completed", {"n": 1}, 1), ("step-2", "completed", {"n": 2}, 1),
        ("step-3", "completed", {"n": 3}, 1), ("step-4", "completed", {"n": 4}, 2),
    ]
    assert status_history(job_id) == ["queued", "running", "queued", "running", "completed"]


def test_retries_exhausted_fail_with_the_last_error(worker, project):
    job_id = new_job(project, payload={"steps": 2, "fail_first_attempts": 10}, max_attempts=2)
    row = wait_for(job_id)
    assert row["status"] == "failed"
    assert row["attempts"] == 2
    assert row["last_error"] == ("RetryableError: canary step-2 failing on purpose "
                                 "(fail_first_attempts)")
    assert row["completed_at"] is not None
    assert status_history(job_id) == ["queued", "running", "queued", "running", "failed"]
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
    assert step_events(job_id, "started") == ["ok"], "the completed step replays, never reruns"


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
    from tasks import runner

    job_id = new_job(project, payload={"steps": 1})
    wait_for(job_id)
    before = job(job_id)
    assert runner.run_job(str(job_id)) == "skipped"
    assert job(job_id) == before
