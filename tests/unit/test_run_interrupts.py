"""What the heartbeat found of the runs it covers reaches the thread running each one
(tasks.engine.lifecycle.interrupted), and only that thread, and only while it runs."""

from __future__ import annotations

import threading
import uuid

from tasks.engine import lifecycle
from tasks.engine.errors import CancelRequested, LostOwnership


def test_a_cancel_or_a_lost_claim_reaches_the_thread_running_that_job_alone() -> None:
    mine, other, lost = (uuid.uuid4(), uuid.uuid4()), (uuid.uuid4(), uuid.uuid4()), \
        (uuid.uuid4(), uuid.uuid4())
    seen: dict[str, object] = {}

    def run(name: str, token: uuid.UUID, job: uuid.UUID, go: threading.Event) -> None:
        lifecycle.holding(token, job)
        go.wait(5)
        seen[name] = lifecycle.interrupted()
        lifecycle.released(token)
        seen[f"{name} after"] = lifecycle.interrupted()

    go = threading.Event()
    threads = [threading.Thread(target=run, args=(name, *run_of, go))
               for name, run_of in (("mine", mine), ("other", other), ("lost", lost))]
    for t in threads:
        t.start()
    # The heartbeat's statement: `mine` asked to cancel, `other` running on, `lost` absent
    # (its claim token is no longer on the row)
    lifecycle._note_interrupts([mine, other, lost], {mine[0]: True, other[0]: False})
    go.set()
    for t in threads:
        t.join(5)
    assert isinstance(seen["mine"], CancelRequested)
    assert seen["other"] is None
    assert isinstance(seen["lost"], LostOwnership)
    assert all(seen[f"{n} after"] is None for n in ("mine", "other", "lost"))
    assert lifecycle.interrupted() is None  # this thread runs nothing


def test_a_run_that_ended_before_the_heartbeat_answered_is_not_marked() -> None:
    token, job = uuid.uuid4(), uuid.uuid4()
    lifecycle.holding(token, job)
    lifecycle.released(token)
    lifecycle._note_interrupts([(token, job)], {})
    assert token not in lifecycle._interrupts
