"""The job state machine: every legal edge, a sample of illegal ones, and guard()."""

from __future__ import annotations

import pytest

from tasks.engine.status import (
    ACTIVE,
    TERMINAL,
    TRANSITIONS,
    IllegalTransition,
    JobStatus,
    can_transition,
    guard,
    sources_of,
)

S = JobStatus

LEGAL = [
    pytest.param(S.QUEUED, S.RUNNING, id="queued->running: a worker claims it"),
    pytest.param(S.QUEUED, S.CANCELED, id="queued->canceled: canceled before it ran"),
    pytest.param(S.RUNNING, S.COMPLETED, id="running->completed: handler returned"),
    pytest.param(S.RUNNING, S.FAILED, id="running->failed: permanent error or attempts spent"),
    pytest.param(S.RUNNING, S.CANCELED, id="running->canceled: cancel seen at a step boundary"),
    pytest.param(S.RUNNING, S.QUEUED, id="running->queued: retry, reclaim or shutdown"),
    pytest.param(S.RUNNING, S.WAITING, id="running->waiting: suspended on children or timer"),
    pytest.param(S.WAITING, S.QUEUED, id="waiting->queued: children done or timer due"),
    pytest.param(S.WAITING, S.CANCELED, id="waiting->canceled: canceled while suspended"),
    pytest.param(S.FAILED, S.QUEUED, id="failed->queued: manual retry"),
]

ILLEGAL = [
    pytest.param(S.QUEUED, S.COMPLETED, id="queued->completed: must run first"),
    pytest.param(S.QUEUED, S.FAILED, id="queued->failed: only a running attempt fails"),
    pytest.param(S.QUEUED, S.WAITING, id="queued->waiting: only a running handler suspends"),
    pytest.param(S.QUEUED, S.QUEUED, id="queued->queued: no self edges"),
    pytest.param(S.RUNNING, S.RUNNING, id="running->running: a second claim must fail"),
    pytest.param(S.WAITING, S.RUNNING, id="waiting->running: resume goes through queued"),
    pytest.param(S.WAITING, S.COMPLETED, id="waiting->completed: must run again to finish"),
    pytest.param(S.COMPLETED, S.QUEUED, id="completed->queued: completed is final"),
    pytest.param(S.COMPLETED, S.FAILED, id="completed->failed: completed is final"),
    pytest.param(S.CANCELED, S.QUEUED, id="canceled->queued: canceled is final"),
    pytest.param(S.CANCELED, S.RUNNING, id="canceled->running: a stale delivery must not run it"),
    pytest.param(S.FAILED, S.RUNNING, id="failed->running: manual retry goes through queued"),
    pytest.param(S.FAILED, S.CANCELED, id="failed->canceled: failed is already final"),
]


@pytest.mark.parametrize(("old", "new"), LEGAL)
def test_legal_edge_is_allowed_and_guarded(old: JobStatus, new: JobStatus) -> None:
    assert can_transition(old, new)
    assert guard(old, new) == f"status IN ('{old.value}')"


@pytest.mark.parametrize(("old", "new"), ILLEGAL)
def test_illegal_edge_is_refused(old: JobStatus, new: JobStatus) -> None:
    assert not can_transition(old, new)
    with pytest.raises(IllegalTransition, match=f"{old} -> {new}"):
        guard(old, new)


def test_the_table_has_exactly_the_documented_edges() -> None:
    """A new edge must be added to LEGAL above (with its reason) or the test fails."""
    edges = {(old, new) for old, nexts in TRANSITIONS.items() for new in nexts}
    assert edges == {tuple(p.values) for p in LEGAL}
    assert set(TRANSITIONS) == set(JobStatus), "every status has a row"


def test_terminal_and_active_partition_the_statuses() -> None:
    # failed keeps one edge (a manual retry) but nothing automatic leaves it: a parent
    # waiting on a failed child, or a live stream of a failed job, must treat it as done.
    assert {S.COMPLETED, S.FAILED, S.CANCELED} == TERMINAL
    assert {S.QUEUED, S.RUNNING, S.WAITING} == ACTIVE


def test_only_manual_retry_leaves_a_terminal_status() -> None:
    leaving = {(old, new) for old in TERMINAL for new in TRANSITIONS[old]}
    assert leaving == {(S.FAILED, S.QUEUED)}


def test_guard_with_several_sources_lists_them_all_sorted() -> None:
    assert guard({S.WAITING, S.QUEUED}, S.CANCELED) == "status IN ('queued', 'waiting')"


def test_guard_refuses_a_set_with_one_illegal_source() -> None:
    with pytest.raises(IllegalTransition, match="completed -> canceled"):
        guard({S.QUEUED, S.COMPLETED}, S.CANCELED)


def test_guard_refuses_an_empty_source_set() -> None:
    with pytest.raises(IllegalTransition, match="no source status"):
        guard(set(), S.CANCELED)


@pytest.mark.parametrize(
    ("new", "sources"),
    [
        pytest.param(S.QUEUED, {S.RUNNING, S.WAITING, S.FAILED},
                     id="queued: retry, resume, manual"),
        pytest.param(S.CANCELED, {S.QUEUED, S.RUNNING, S.WAITING}, id="canceled: any live status"),
        pytest.param(S.RUNNING, {S.QUEUED}, id="running: only by a claim"),
    ],
)
def test_sources_of(new: JobStatus, sources: set[JobStatus]) -> None:
    assert sources_of(new) == sources
