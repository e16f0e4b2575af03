"""The "why is this job stuck?" sentence: one row per situation an operator meets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tasks.engine.diagnosis import Facts, Peer, diagnose

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def facts(**overrides) -> Facts:
    base = dict(now=NOW, id="7b0c9d1e-0000-0000-0000-000000000000", job_type="system.canary",
                status="queued", queue="default", attempts=0, max_attempts=3, run_after=NOW,
                queue_consumers=1)
    return Facts(**(base | overrides))


CHILD = Peer("aaaaaaaa-1111-2222-3333-444444444444", "system.canary", "running")

CASES = [
    # (reason, facts, words the sentence must contain) — why each row matters
    ("completed", facts(status="completed", attempts=2, completed_at=NOW - timedelta(seconds=5)),
     ["completed 5s ago", "2 attempt"]),  # not stuck at all: say so
    ("failed", facts(status="failed", attempts=3, last_error="RuntimeError: boom"),
     ["failed after 3", "RuntimeError: boom", "retry"]),  # the error and the way out
    ("waiting_on_children", facts(status="waiting", waiting_on=[CHILD]),
     ["1 child", "aaaaaaaa", "running"]),  # which children, by short id
    ("sleeping", facts(status="waiting", wake_at=NOW + timedelta(minutes=10)),
     ["sleeping until", "in 10 min"]),  # a durable timer
    ("llm_budget", facts(status="waiting", wait_reason="llm_budget",
                         wake_at=NOW + timedelta(hours=12)),
     ["budget", "resets"]),  # flow control by money waits, and says why
    ("ready_to_resume", facts(status="waiting"), ["next sweep", "no sweep has run yet"]),
    ("retrying", facts(attempts=1, last_error="RetryableError: flaky",
                       run_after=NOW + timedelta(seconds=30)),
     ["retrying", "flaky", "attempt 2 of 3", "in 30s"]),  # which error, next attempt when
    ("scheduled", facts(run_after=NOW + timedelta(hours=2)), ["scheduled", "in 2.0 h"]),
    ("concurrency_limit", facts(concurrency_key="chat:p", concurrency_limit=1,
                                key_holders=[CHILD], key_at_limit=True),
     ["'chat:p'", "limit 1", "aaaaaaaa"]),  # over which key, held by which jobs
    ("concurrency_limit", facts(concurrency_key="k", concurrency_limit=2, key_holders=[CHILD],
                                key_at_limit=True, scoped=True),
     ["aaaaaaaa", "and jobs of other tenants"]),  # a tenant: its own holders, others unnamed
    ("no_worker", facts(queue="browser", queue_consumers=0),
     ["No live worker", "'browser'", "-Q browser"]),  # the fix, too
    ("queued", facts(queued_ahead=4, dispatched_at=NOW - timedelta(seconds=2)),
     ["behind 4 job(s) sent before it", "1 live worker", "2s ago"]),
    ("queued", facts(queued_ahead=1, others_ahead=True, scoped=True),
     ["behind 1 of your job(s) sent before it and jobs of other tenants"]),  # no count of theirs
    ("owner_limit", facts(owner_cap=16, owner_places=16, owner_ahead=3, scoped=True),
     ["your jobs", "you have 16 job(s) running", "SWITCHYARD_OWNER_MAX_ACTIVE=16",
      "3 of your waiting job(s) go before it"]),  # held back in PostgreSQL, not by a worker
    ("owner_limit", facts(owner_cap=2, owner_places=2, queue_consumers=0),
     ["its owner has 2 job(s)", "0 of its owner's waiting"]),  # before "no worker": held here
    ("queued", facts(owner_cap=16, owner_places=15),  # room left: the sweep sends it
     ["queued on 'default'", "not sent to a worker yet", "dispatch sweep (every 5s)"]),
    ("queued", facts(sweeps_seen_at=NOW - timedelta(minutes=3)),  # ... unless beat is dead
     ["the dispatch sweep (every 5s) sends it. But no sweep has run for 3 min",
      "is beat running", "`switchyard beat`"]),
    ("ready_to_resume", facts(status="waiting", sweeps_seen_at=NOW - timedelta(seconds=4)),
     ["puts it back in the queue."]),  # beat alive: nothing more to say
    ("queued", facts(queued_ahead=2, queued_tied=40, dispatched_at=NOW),  # sent in one batch
     ["behind 2 job(s) sent before it (and up to 40 sent at the same moment)"]),
    ("owner_limit", facts(owner_cap=2, owner_places=2, owner_ahead=1, owner_tied=599),
     ["1 of its owner's waiting job(s) go before it (and up to 599 due at the same moment)"]),
    ("running", facts(status="running", attempts=1, locked_by="host:42",
                      heartbeat_at=NOW - timedelta(seconds=3), current_step="fetch",
                      step_started_at=NOW - timedelta(seconds=20)),
     ["host:42", "3s ago", "'fetch'", "20s ago", "attempt 1 of 3"]),
    ("worker_lost", facts(status="running", attempts=1, locked_by="host:42",
                          heartbeat_at=NOW - timedelta(minutes=5)),
     ["host:42", "5 min ago", "reclaim"]),  # a dead worker, and what will happen
    ("cancel_requested", facts(status="running", cancel_requested=True, locked_by="h:1",
                               heartbeat_at=NOW), ["cancel", "step boundary"]),
]


@pytest.mark.parametrize(("reason", "f", "words"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_situation_gets_its_sentence(reason: str, f: Facts, words: list[str]) -> None:
    d = diagnose(f)
    assert d.reason == reason
    for w in words:
        assert w in d.summary, f"{w!r} missing from: {d.summary}"
    assert d.summary.endswith(".")
