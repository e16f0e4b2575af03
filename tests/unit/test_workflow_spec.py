"""Workflow definitions: the models, every validation rule, cycles named, order and upstream."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tasks.workflows.errors import WorkflowError
from tasks.workflows.spec import (
    MAX_PAYLOAD_BYTES,
    MAX_STEPS,
    StepSpec,
    WorkflowSpec,
    order,
    problems,
    upstream,
)

JOB_TYPES = {"report.build": True, "mail.send": True, "approval.execute": False}


def job_type_ok(name: str) -> str | None:
    """Stands in for the registry: unknown and internal types are refused, with a reason."""
    if name not in JOB_TYPES:
        return f"unknown job_type {name!r}"
    if not JOB_TYPES[name]:
        return f"job_type {name!r} is internal: Switchyard enqueues it itself"
    return None


def step(name: str, *depends_on: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "job_type": "report.build", "depends_on": list(depends_on), **fields}


def spec(*steps: dict[str, Any], name: str = "nightly report") -> WorkflowSpec:
    return WorkflowSpec.model_validate({"name": name, "steps": list(steps)})


def check(*steps: dict[str, Any], name: str = "nightly report") -> list[str]:
    return problems(spec(*steps, name=name), job_type_ok)


def test_a_good_workflow_has_no_problems_and_runs_in_layers() -> None:
    # Given a diamond: fetch -> (summarise, chart) -> send, with templates, a condition, a gate
    workflow = spec(
        step("fetch", payload={"topic": "{{inputs.topic}}"}),
        step("summarise", "fetch", payload={"text": "{{steps.fetch.output.body}}"}),
        step("chart", "fetch", payload={"rows": "{{steps.fetch.output.rows}}"},
             condition="steps.fetch.output.rows != [] and inputs.charts == true",
             on_failure="continue"),
        step("send", "summarise", "chart", job_type="mail.send", requires_approval=True,
             payload={"subject": "Report on {{inputs.topic}}",
                      "body": "{{steps.summarise.output.text}}",
                      "chart": "{{steps.chart.output.url}}", "first": "{{steps.fetch.status}}"},
             condition="{{steps.summarise.status}} == 'completed'"),
    )
    # Then nothing is wrong, and the steps run in three layers
    assert problems(workflow, job_type_ok) == []
    assert order(workflow) == [["fetch"], ["summarise", "chart"], ["send"]]
    assert upstream(workflow) == {"fetch": set(), "summarise": {"fetch"}, "chart": {"fetch"},
                                  "send": {"fetch", "summarise", "chart"}}


def test_a_json_body_validates_strictly_as_the_routes_read_it() -> None:
    body = ('{"name": "w", "steps": [{"name": "a", "job_type": "report.build", '
            '"payload": {"n": 1.5, "deep": [null, {"x": true}]}, "requires_approval": true}]}')
    workflow = WorkflowSpec.model_validate_json(body)
    assert workflow.steps[0].payload == {"n": 1.5, "deep": [None, {"x": True}]}
    assert workflow.steps[0].requires_approval is True
    with pytest.raises(ValidationError):
        WorkflowSpec.model_validate_json(body.replace("true}]}", '"yes"}]}'))


def test_step_defaults() -> None:
    only = StepSpec.model_validate({"name": "a", "job_type": "report.build"})
    assert (only.payload, only.depends_on, only.condition, only.on_failure,
            only.requires_approval) == ({}, [], None, "stop", False)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"name": "w", "steps": [], "extra": 1}, id="an unknown workflow field"),
        pytest.param({"name": "w", "steps": [step("a", when="x")]}, id="an unknown step field"),
        pytest.param({"name": "w", "steps": [step("a", on_failure="retry")]},
                     id="on_failure is stop or continue"),
        pytest.param({"name": "w", "steps": [step("a", requires_approval="true")]},
                     id="a boolean as a string is no boolean"),
        pytest.param({"name": "w", "steps": [step("a", requires_approval=1)]},
                     id="1 is no boolean"),
        pytest.param({"name": "w", "steps": [step("a", payload=["x"])]},
                     id="a payload is an object"),
        pytest.param({"name": "w", "steps": [step("a", depends_on="b")]},
                     id="depends_on is a list"),
        pytest.param({"name": "w", "steps": [step("a", condition=True)]},
                     id="a condition is text"),
        pytest.param({"name": 5, "steps": []}, id="a name is text, not coerced"),
        pytest.param({"name": "w"}, id="steps are required"),
        pytest.param({"name": "w", "steps": [{"name": "a"}]}, id="job_type is required"),
    ],
)
def test_the_models_refuse_wrong_shapes_and_types(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        WorkflowSpec.model_validate(body)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param([step("a", "c"), step("b", "a"), step("c", "b")],
                     ["step 'a': depends_on: cycle a → c → b → a (each step depends on the next)"],
                     id="a cycle of three, named from its first step"),
        pytest.param([step("x"), step("b", "a"), step("a", "b")],
                     ["step 'b': depends_on: cycle b → a → b (each step depends on the next)"],
                     id="a cycle of two after a good step"),
        pytest.param([step("a", "a")],
                     ["step 'a': depends_on: cycle a → a (each step depends on the next)"],
                     id="a step that depends on itself"),
        pytest.param([step("a", "b"), step("b", "a"), step("c", "d"), step("d", "c"),
                      step("e", "a", "c")],
                     ["step 'a': depends_on: cycle a → b → a (each step depends on the next)",
                      "step 'c': depends_on: cycle c → d → c (each step depends on the next)"],
                     id="two separate cycles, both named; e merely waits on them"),
        pytest.param([step("a", "b", "c"), step("b", "c"), step("c", "d", "a"), step("d", "a")],
                     ["step 'a': depends_on: cycle a → c → a (each step depends on the next)"],
                     id="one tangle, named by its shortest loop through the first step"),
    ],
)
def test_cycles_are_named(steps: list[dict[str, Any]], expected: list[str]) -> None:
    assert check(*steps) == expected


def test_order_refuses_a_cycle_by_name() -> None:
    with pytest.raises(WorkflowError, match="cycle a → b → a"):
        order(spec(step("a", "b"), step("b", "a")))


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param([step("a", "ghost")], "step 'a': depends_on: no step is named 'ghost'",
                     id="an unknown dependency"),
        pytest.param([step("a"), step("b", "a", "a")],
                     "step 'b': depends_on: 'a' is listed more than once",
                     id="a dependency listed twice"),
        pytest.param([step("a", job_type="nope.nothing")],
                     "step 'a': job_type: unknown job_type 'nope.nothing'",
                     id="an unknown job type"),
        pytest.param([step("a", job_type="approval.execute")],
                     "step 'a': job_type: job_type 'approval.execute' is internal",
                     id="an internal job type"),
        pytest.param([step("a"), step("b"), step("a")],
                     "step 'a': name: used by steps #1, #3", id="a duplicate name"),
        pytest.param([step("Fetch")], "step #1: name: 'Fetch' must be a lowercase letter",
                     id="an upper-case name"),
        pytest.param([step("1st")], "step #1: name: '1st' must be", id="a leading digit"),
        pytest.param([step("")], "step #1: name: '' must be", id="an empty name"),
        pytest.param([step("a.b")], "step #1: name: 'a.b' must be", id="a dot would break paths"),
        pytest.param([step("a" * 65)], "step #1: name: 'aaaa", id="65 characters"),
        pytest.param([step("a", payload={"x": "{{steps.b.output}}"}), step("b")],
                     "step 'a': payload: steps.b.output reads step 'b', which is not upstream "
                     "(add it to depends_on, or a step that depends on it)",
                     id="a template reading a sibling"),
        pytest.param([step("a", payload={"x": ["{{steps.b.output.y}}"]}), step("b", "a")],
                     "step 'a': payload: steps.b.output.y reads step 'b', which is not upstream",
                     id="a template reading a downstream step"),
        pytest.param([step("a", payload={"x": "{{steps.a.output}}"})],
                     "step 'a': payload: steps.a.output is this step's own result",
                     id="a template reading its own step"),
        pytest.param([step("a", payload={"x": "{{steps.zed.status}}"})],
                     "step 'a': payload: steps.zed.status names no step",
                     id="a template reading an unknown step"),
        pytest.param([step("a", payload={"x": "{{nope}}"})],
                     "step 'a': payload: {{nope}}: a path starts with inputs or steps",
                     id="a malformed template"),
        pytest.param([step("a", payload={"x": "x" * MAX_PAYLOAD_BYTES})],
                     f"step 'a': payload: {MAX_PAYLOAD_BYTES + 8} bytes of JSON, over the cap",
                     id="a payload over the size cap"),
        pytest.param([step("a", payload={"x": "é" * (MAX_PAYLOAD_BYTES // 2)})],
                     f"step 'a': payload: {MAX_PAYLOAD_BYTES + 8} bytes of JSON",
                     id="the cap counts UTF-8 bytes, not characters"),
        pytest.param([step("a", payload={"x": "nul\x00"})],
                     "step 'a': payload: no string may contain the NUL character",
                     id="a NUL in a payload value"),
        pytest.param([step("a", payload={"k\x00": 1})],
                     "step 'a': payload: no string may contain the NUL", id="a NUL in a key"),
        pytest.param([step("a", condition="steps.b.output.ok"), step("b")],
                     "step 'a': condition: steps.b.output.ok reads step 'b', which is not "
                     "upstream", id="a condition reading a sibling"),
        pytest.param([step("a", condition="inputs.n = 1")],
                     "step 'a': condition: a lone = assigns nothing here: compare with == "
                     "(column 10)", id="a condition that does not parse, with its column"),
        pytest.param([step("a", condition="true or " * 200 + "true")],
                     "step 'a': condition: a condition is at most 1000 characters",
                     id="a condition over the length cap"),
        pytest.param([step("a", condition="true\x00")], "step 'a': condition: must not "
                     "contain the NUL", id="a NUL in a condition"),
    ],
)
def test_each_rule_is_reported_naming_the_step_and_field(steps: list[dict[str, Any]],
                                                         expected: str) -> None:
    found = check(*steps)
    assert any(p.startswith(expected) for p in found), found


def test_names_of_64_characters_with_digits_dashes_and_underscores_are_fine() -> None:
    assert check(step("a" * 64), step("b-2_x", "a" * 64)) == []


def test_a_template_may_read_any_transitive_upstream_step() -> None:
    # Given a chain a <- b <- c, c reading a's output through b
    found = check(step("a"), step("b", "a"), step("c", "b", payload={
        "from_a": "{{steps.a.output.x}}", "from_b": "b said {{steps.b.output}}",
        "status": "{{steps.a.status}}"}, condition="steps.a.output.ok == true"))
    assert found == []


def test_inputs_need_no_declaration() -> None:
    assert check(step("a", payload={"x": "{{inputs.anything.0.deep}}"},
                      condition="inputs.flag == true")) == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("   ", "name: 1 to 200 characters, not blank, no NUL", id="blank"),
        pytest.param("x" * 201, "name: 1 to 200 characters, not blank, no NUL", id="too long"),
        pytest.param("nul\x00", "name: 1 to 200 characters, not blank, no NUL", id="a NUL"),
    ],
)
def test_the_workflow_name_is_a_label_with_limits(name: str, expected: str) -> None:
    assert check(step("a"), name=name) == [expected]


def test_a_workflow_needs_steps_and_at_most_the_limit() -> None:
    assert check() == ["steps: a workflow needs at least one step"]
    chain = [step("s0")] + [step(f"s{i}", f"s{i - 1}") for i in range(1, MAX_STEPS)]
    assert check(*chain) == []
    assert order(spec(*chain)) == [[f"s{i}"] for i in range(MAX_STEPS)]
    over = [*chain, step("extra", job_type="nope.nope")]
    assert check(*over) == [f"steps: at most {MAX_STEPS} steps, not {MAX_STEPS + 1}"]


def test_every_problem_is_reported_at_once() -> None:
    found = check(
        step("a", "ghost", job_type="nope.nope", payload={"x": "{{steps.c.output}}"}),
        step("Bad Name"),
        step("c", "d", condition="steps.a.output.ok =="),
        step("d", "c"),
        step("a"),
    )
    assert found == [
        "step 'a': job_type: unknown job_type 'nope.nope'",
        "step 'a': depends_on: no step is named 'ghost'",
        "step 'a': payload: steps.c.output reads step 'c', which is not upstream "
        "(add it to depends_on, or a step that depends on it)",
        "step #2: name: 'Bad Name' must be a lowercase letter, then up to 63 lowercase "
        "letters, digits, _ or -",
        "step 'c': condition: expected a value, found the end of the condition (column 21)",
        "step 'a': name: used by steps #1, #5",
        "step 'c': depends_on: cycle c → d → c (each step depends on the next)",
    ]


def test_order_keeps_declared_order_within_a_layer() -> None:
    workflow = spec(step("z"), step("m", "z"), step("a"), step("k", "a", "z"), step("b", "z"))
    assert order(workflow) == [["z", "a"], ["m", "k", "b"]]


def test_upstream_is_transitive() -> None:
    workflow = spec(step("a"), step("b", "a"), step("c", "b"), step("d", "c", "a"), step("e"))
    assert upstream(workflow) == {"a": set(), "b": {"a"}, "c": {"a", "b"},
                                  "d": {"a", "b", "c"}, "e": set()}


# Hypothesis: on any DAG, every layer depends only on earlier layers and upstream is the
# transitive closure; on any graph at all, problems() lists a cycle exactly when order fails.

@st.composite
def graphs(draw: st.DrawFn, acyclic: bool) -> list[dict[str, Any]]:
    names = [f"s{i}" for i in range(draw(st.integers(1, 12)))]
    steps = []
    for i, name in enumerate(names):
        pool = names[:i] if acyclic else names
        deps = draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)) if pool else []
        steps.append(step(name, *deps))
    return steps


@settings(max_examples=200, deadline=None)
@given(steps=graphs(acyclic=True))
def test_layers_respect_every_dependency(steps: list[dict[str, Any]]) -> None:
    workflow = spec(*steps)
    layers = order(workflow)
    position = {name: n for n, layer in enumerate(layers) for name in layer}
    assert sorted(position) == sorted(s["name"] for s in steps)
    ups = upstream(workflow)
    for s in steps:
        assert all(position[dep] < position[s["name"]] for dep in s["depends_on"])
        assert set(s["depends_on"]) <= ups[s["name"]]
        assert all(ups[dep] <= ups[s["name"]] for dep in s["depends_on"])
        assert s["name"] not in ups[s["name"]]
    assert problems(workflow, job_type_ok) == []


@settings(max_examples=200, deadline=None)
@given(steps=graphs(acyclic=False))
def test_a_cycle_is_reported_exactly_when_the_steps_cannot_be_ordered(
        steps: list[dict[str, Any]]) -> None:
    workflow = spec(*steps)
    cycles = [p for p in problems(workflow, job_type_ok) if "cycle" in p]
    try:
        order(workflow)
        assert cycles == []
    except WorkflowError:
        assert cycles
        deps = {s["name"]: s["depends_on"] for s in steps}
        for problem in cycles:  # each named loop is a real one: every arrow is a dependency
            loop = problem.split("cycle ")[1].split(" (")[0].split(" → ")
            assert loop[0] == loop[-1]
            assert all(b in deps[a] for a, b in itertools.pairwise(loop))
