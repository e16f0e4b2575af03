"""The job state machine: one enum, one transition table, enforced everywhere.

Every SQL statement that writes `agent_jobs.status` builds its guard with
`guard()`, so an illegal transition fails when the module is imported, not in
production.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


S = JobStatus

TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    S.QUEUED: frozenset({S.RUNNING, S.CANCELED}),
    # running -> queued: a retry, a reclaim after a dead worker, a graceful shutdown.
    S.RUNNING: frozenset({S.COMPLETED, S.FAILED, S.CANCELED, S.QUEUED, S.WAITING}),
    S.WAITING: frozenset({S.QUEUED, S.CANCELED}),
    S.FAILED: frozenset({S.QUEUED}),  # manual retry
    S.COMPLETED: frozenset(),
    S.CANCELED: frozenset(),
}

# Terminal: nothing automatic moves the job again. `failed` keeps one edge, the
# manual retry, yet a parent waiting on a failed child must resume and a stream
# of a failed job must end, so it is terminal too.
TERMINAL: frozenset[JobStatus] = frozenset({S.COMPLETED, S.FAILED, S.CANCELED})
assert all(TRANSITIONS[s] <= {S.QUEUED} for s in TERMINAL)  # only a manual retry leaves one
ACTIVE: frozenset[JobStatus] = frozenset(JobStatus) - TERMINAL


class IllegalTransition(ValueError):
    """Code tried to move a job along an edge the state machine does not have."""


def can_transition(old: JobStatus, new: JobStatus) -> bool:
    return new in TRANSITIONS[old]


def sources_of(new: JobStatus) -> frozenset[JobStatus]:
    """Every status from which `new` may be reached."""
    return frozenset(old for old, nxt in TRANSITIONS.items() if new in nxt)


def guard(old: JobStatus | frozenset[JobStatus] | set[JobStatus], new: JobStatus,
          column: str = "status") -> str:
    """SQL predicate `status IN (...)` for a compare-and-set to `new`, checked against the table
    (`column`: how the statement reads the status, tasks.engine.sql.keyed_status)."""
    olds = {old} if isinstance(old, JobStatus) else set(old)
    if not olds:
        raise IllegalTransition(f"no source status given for -> {new}")
    for o in olds:
        if not can_transition(o, new):
            raise IllegalTransition(f"{o} -> {new} is not a legal job transition")
    return f"{column} IN (" + ", ".join(f"'{o.value}'" for o in sorted(olds)) + ")"


def sql_list(statuses: frozenset[JobStatus] | set[JobStatus]) -> str:
    return "(" + ", ".join(f"'{s.value}'" for s in sorted(statuses)) + ")"
