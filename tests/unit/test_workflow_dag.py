"""The DAG rule (tasks.workflows.dag) simulated on random graphs: every run ends, no step
starts twice or before its upstream ended, parallelism stays bounded, a broken upstream
skips its dependants, and a failure under "stop" ends the run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.workflows.dag import (
    BROKEN,
    COMPLETED,
    ENDED,
    FAILED,
    PENDING,
    RUNNING,
    SKIPPED,
    Node,
    StepState,
    decide,
)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[Node], dict[str, bool]]:
    size = draw(st.integers(1, 9))
    nodes, fails = [], {}
    for i in range(size):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        cond = draw(st.sampled_from([None, "inputs.go == true", "inputs.go == false",
                                     "inputs.n + 1"]))  # the last cannot be evaluated
        name = f"s{i}"
        nodes.append(Node(name, tuple(f"s{d}" for d in sorted(deps)), cond,
                          draw(st.sampled_from(["stop", "continue"]))))
        fails[name] = draw(st.booleans())
    return nodes, fails


def simulate(nodes: list[Node], fails: dict[str, bool], parallel: int) -> tuple[
        dict[str, StepState], str | None, list[str]]:
    states = {n.name: StepState() for n in nodes}
    started: list[str] = []
    for _ in range(100):
        d = decide(nodes, states, {"go": True, "n": 1}, parallel)
        for name in d.skip:
            states[name] = StepState(SKIPPED)
        for name in d.fail:
            states[name] = StepState(FAILED)
        if d.stop is not None:
            return states, d.stop, started
        for name in d.open:
            node = next(n for n in nodes if n.name == name)
            assert all(states[u].status in ENDED for u in node.depends_on)
            states[name] = StepState(RUNNING)
            started.append(name)
        assert sum(s.status == RUNNING for s in states.values()) <= parallel
        if d.finished:
            return states, None, started
        running = [n for n, s in states.items() if s.status == RUNNING]
        assert running, "nothing runs and the run is not finished: it would wait forever"
        first = running[0]  # one child ends per round, as the driver sees it
        states[first] = StepState(FAILED if fails[first] else COMPLETED)
    raise AssertionError("the run did not end in 100 rounds")


@settings(max_examples=300, deadline=None)
@given(graphs(), st.integers(1, 4))
def test_every_run_ends_and_no_step_starts_twice(graph, parallel: int) -> None:
    nodes, fails = graph
    states, stopped, started = simulate(nodes, fails, parallel)
    assert len(started) == len(set(started))
    if stopped is None:
        assert all(s.status in ENDED for s in states.values())
        for node in nodes:  # a broken upstream leaves its dependant skipped, never run
            if any(states[u].status in BROKEN for u in node.depends_on):
                assert states[node.name].status == SKIPPED and node.name not in started
    else:
        stopper = next(n for n in nodes if n.name == stopped)
        assert states[stopped].status == FAILED and stopper.on_failure == "stop"


def test_a_skip_reads_as_skipped_downstream_and_a_false_condition_skips() -> None:
    nodes = [Node("a", condition="inputs.go == true"),
             Node("b", ("a",), condition='steps.a.status == "skipped"'),
             Node("c", ("a",), condition="steps.a.output == null"),
             Node("d", ("a",), condition='steps.a.status == "completed"')]
    states = {n.name: StepState() for n in nodes}
    d = decide(nodes, states, {"go": False}, 4)
    assert d.skip == {"a": "condition is false", "d": "condition is false"}
    assert d.open == ["b", "c"]


def test_a_condition_that_cannot_be_evaluated_fails_its_step() -> None:
    d = decide([Node("a", condition="inputs.n > 1", on_failure="continue")],
               {"a": StepState()}, {"n": "x"}, 4)
    assert list(d.fail) == ["a"] and "condition" in d.fail["a"]
    assert d.stop is None and d.finished


def test_parallelism_is_bounded_and_pending_waits_for_room() -> None:
    nodes = [Node(f"s{i}") for i in range(5)]
    states = {n.name: StepState(RUNNING if i < 2 else PENDING) for i, n in enumerate(nodes)}
    assert decide(nodes, states, {}, 3).open == ["s2"]
