"""The DAG driver spawns a round's children as one step (issue 26: enqueue_many for internal
fan-out), and a run recorded before that — one `spawn:` step per child, right after its
`resolve:` — still replays step for step: no NonDeterministicStep, nothing run again, the
same children. Replay only: the database is a tripwire (tests/unit/test_context_replay.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tasks.engine.context import JobContext
from tasks.workflows.dag import Node
from tasks.workflows.driver import drive
from tests.unit.test_context_replay import claimed, no_db  # noqa: F401 (fixture)

NODES = [Node("a"), Node("b"), Node("c")]
JOB = {"job_type": "system.canary", "payload": {"steps": 1}}


class Waited(Exception):
    """The replay reached the wait of its first round: what was recorded is all replayed."""


def resolve(node: Node, states: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    raise AssertionError(f"{node.name} was resolved again: its resolution was recorded")


def replay(steps: list[tuple[str, str, object]]) -> dict[str, Any]:
    ctx = JobContext(claimed(*steps), worker="w:1")
    seen: dict[str, Any] = {}

    def wait_any(children: list[str], gates: list[str]) -> None:
        seen["children"] = children
        raise Waited

    ctx.wait_any = wait_any  # type: ignore[method-assign]
    with pytest.raises(Waited):
        drive(ctx, NODES, resolve, key="wf")
    return seen


def test_a_run_recorded_one_spawn_per_child_replays_as_it_was_recorded(no_db) -> None:  # noqa: F811
    children = [str(uuid.uuid4()) for _ in NODES]
    steps: list[tuple[str, str, object]] = [("wf:observe:0", "completed", {})]
    for n, node in enumerate(NODES):
        steps += [(f"wf:resolve:{node.name}", "completed", JOB),
                  (f"spawn:system.canary:{n}", "completed", children[n])]
    steps.append(("wf:mirror:0", "completed", None))
    assert replay(steps)["children"] == children
    assert no_db == []


def test_a_rounds_children_are_spawned_as_one_step(no_db) -> None:  # noqa: F811
    children = [str(uuid.uuid4()) for _ in NODES]
    steps: list[tuple[str, str, object]] = [("wf:observe:0", "completed", {})]
    steps += [(f"wf:resolve:{node.name}", "completed", JOB) for node in NODES]
    steps += [("spawn_many:0:3", "completed", children), ("wf:mirror:0", "completed", None)]
    assert replay(steps)["children"] == children  # each step running its child
    assert no_db == []
