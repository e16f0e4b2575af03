"""JobContext replay without a database: recorded steps come back, mismatches are refused.

Only the paths that must not touch the database are tested here (store.checkpoint
is replaced by a tripwire); running a new step is covered in tests/integration.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from tasks.engine import store
from tasks.engine.context import JobContext
from tasks.engine.errors import NonDeterministicStep


def claimed(*steps: tuple[str, str, object], attempt: int = 2) -> store.ClaimedJob:
    return store.ClaimedJob(
        id=uuid.uuid4(), project_id=uuid.uuid4(), job_type="system.canary", payload={},
        attempt=attempt, max_attempts=3, timeout_seconds=None,
        steps=tuple(store.RecordedStep(n, s, o) for n, s, o in steps),
        cancel_requested=False, token=uuid.uuid4(), clock=store.DbClock(datetime.now(UTC)),
    )


@pytest.fixture
def no_db(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Fail loudly if the context tries to write: replay must be free."""
    calls: list[dict] = []

    def tripwire(*args: object, **kwargs: object) -> None:
        calls.append({"args": args, "kwargs": kwargs})
        raise AssertionError("replay touched the database")

    monkeypatch.setattr(store, "checkpoint", tripwire)
    return calls


def never(*_: object) -> None:
    raise AssertionError("a completed step ran again")


def test_completed_steps_return_their_recorded_output_without_running(no_db) -> None:
    ctx = JobContext(claimed(("fetch", "completed", {"rows": 3}), ("parse", "completed", [1, 2])),
                     worker="w:1")
    assert ctx.replaying
    assert ctx.step("fetch", never) == {"rows": 3}
    assert ctx.replaying
    assert ctx.step("parse", never) == [1, 2]
    assert not ctx.replaying, "past the recorded steps the context runs for real"
    assert no_db == []


def test_recorded_none_output_is_replayed_not_rerun(no_db) -> None:
    ctx = JobContext(claimed(("side-effect", "completed", None)), worker="w:1")
    assert ctx.step("side-effect", never) is None


def test_a_different_step_name_at_a_recorded_position_is_non_deterministic(no_db) -> None:
    ctx = JobContext(claimed(("a", "completed", 1), ("b", "completed", 2)), worker="w:1")
    ctx.step("a", never)
    with pytest.raises(NonDeterministicStep) as err:
        ctx.step("c", never)
    assert "step 2 is 'c' in this run but 'b' was recorded" in str(err.value)


def test_a_renamed_failed_step_is_non_deterministic_too(no_db) -> None:
    """Even a step that failed last time must keep its name and position."""
    ctx = JobContext(claimed(("a", "completed", 1), ("b", "failed", None)), worker="w:1")
    ctx.step("a", never)
    with pytest.raises(NonDeterministicStep, match="'x' in this run but 'b'"):
        ctx.step("x", never)


def test_a_failed_step_is_not_replayed(no_db) -> None:
    """A recorded failure runs again; its outcome waits for the job's next write."""
    ctx = JobContext(claimed(("a", "failed", None)), worker="w:1")
    assert not ctx.replaying
    ran = []
    assert ctx.step("a", lambda: ran.append(1) or 7) == 7
    assert ran == [1]
    assert ctx.pending is not None and ctx.pending.status == "completed"
    assert ctx.pending.unwritten_start is not None, "the first step's start rides with its outcome"
    with pytest.raises(AssertionError, match="replay touched the database"):
        ctx.step("b", lambda: 2)  # the second step must first write the first one's outcome
    assert len(no_db) == 1


def test_events_are_silent_while_replaying(no_db) -> None:
    ctx = JobContext(claimed(("a", "completed", 1)), worker="w:1")
    ctx.log("already said this last time")
    ctx.emit("delta", "tokens")
    assert no_db == []


def test_spawn_and_sleep_replay_their_recorded_values(no_db) -> None:
    child = str(uuid.uuid4())
    ctx = JobContext(claimed(("spawn:system.canary:0", "completed", child),
                             ("sleep:0", "completed", "2000-01-01T00:00:00+00:00")), worker="w:1")
    assert ctx.spawn("system.canary", {"steps": 1}) == child
    ctx.sleep(3600)  # the recorded wake-up time is long past: no suspension
    assert no_db == []
