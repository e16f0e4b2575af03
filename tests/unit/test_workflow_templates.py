"""Workflow payload templates: found, checked, filled with their JSON types, errors named."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.workflows.errors import WorkflowError
from tasks.workflows.templates import (
    MAX_DEPTH,
    TemplateError,
    parse_path,
    references,
    render,
    resolve,
)

CONTEXT: dict[str, Any] = {
    "inputs": {"n": 3, "name": "Ada", "flag": True, "nothing": None, "ratio": 0.5,
               "tags": ["x", "y"], "meta": {"k": "v", "é": "ü"}},
    "steps": {
        "fetch": {"status": "completed",
                  "output": {"items": [{"name": "first", "score": 9}, {"name": "second"}],
                             "ok": True, "count": 2, "empty": {}, "0": "zero-key"}},
        "maybe": {"status": "skipped", "output": None},
        "broke": {"status": "failed", "output": None},
    },
}


def test_references_finds_every_template_in_nested_values_but_never_in_keys() -> None:
    payload = {
        "a": "{{inputs.n}}",
        "b": ["x {{steps.fetch.output.items.0.name}} y {{ inputs.name }}", 7, None],
        "c": {"{{inputs.key_is_literal}}": {"d": "{{steps.fetch.status}}"}},
        "e": "no template here {not one} }}",
    }
    assert references(payload) == {
        ("inputs", "n"),
        ("steps", "fetch", "output", "items", "0", "name"),
        ("inputs", "name"),
        ("steps", "fetch", "status"),
    }


def test_an_escaped_open_brace_pair_is_literal_text_and_no_reference() -> None:
    assert references("\\{{inputs.x}}") == set()
    assert render("use \\{{name}} in the page", CONTEXT) == "use {{name}} in the page"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{{}}", "a path is dot-separated", id="empty template"),
        pytest.param("{{ inputs. x }}", "a path is dot-separated", id="space inside the path"),
        pytest.param("{{inputs..x}}", "a path is dot-separated", id="empty segment"),
        pytest.param("{{inputs.x[0]}}", "a path is dot-separated", id="brackets are no index"),
        pytest.param("{{env.HOME}}", "starts with inputs or steps", id="unknown root"),
        pytest.param("{{steps.a}}", "steps.<name>.output", id="a step alone names nothing"),
        pytest.param("{{steps.a.result}}", "steps.<name>.output", id="only output or status"),
        pytest.param("{{steps.a.status.x}}", "status is a string", id="status has no fields"),
        pytest.param("hi {{inputs.x", "unclosed {{ at character 4", id="unclosed, position"),
        pytest.param("{{{inputs.x}}}", "a path is dot-separated", id="triple braces"),
    ],
)
def test_malformed_templates_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message.replace("{", r"\{").replace(".", r"\.")):
        references({"field": text})
    with pytest.raises(TemplateError):
        render(text, CONTEXT)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param("{{inputs.n}}", 3, id="an integer stays an integer"),
        pytest.param("{{inputs.ratio}}", 0.5, id="a float stays a float"),
        pytest.param("{{inputs.flag}}", True, id="a boolean stays a boolean"),
        pytest.param("{{inputs.nothing}}", None, id="null stays null"),
        pytest.param("{{inputs.tags}}", ["x", "y"], id="a list stays a list"),
        pytest.param("{{inputs.meta}}", {"k": "v", "é": "ü"}, id="an object stays an object"),
        pytest.param("{{inputs.name}}", "Ada", id="a string stays a string"),
        pytest.param("{{  steps.fetch.output.count  }}", 2, id="spaces inside the braces"),
        pytest.param("{{steps.fetch.output.items.0.name}}", "first", id="a list index"),
        pytest.param("{{steps.fetch.output.items.1}}", {"name": "second"}, id="index, whole"),
        pytest.param("{{steps.fetch.output.0}}", "zero-key", id="a digit key in an object"),
        pytest.param("{{steps.fetch.status}}", "completed", id="a step's status"),
        pytest.param("{{steps.fetch.output.empty}}", {}, id="an empty object"),
    ],
)
def test_a_whole_value_template_keeps_its_json_type(template: str, expected: Any) -> None:
    rendered = render({"value": template, "nested": [template]}, CONTEXT)
    assert rendered == {"value": expected, "nested": [expected]}
    assert type(rendered["value"]) is type(expected)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param("n={{inputs.n}}", "n=3", id="a number as its JSON text"),
        pytest.param("r={{inputs.ratio}}", "r=0.5", id="a float as its JSON text"),
        pytest.param("{{inputs.flag}}!", "true!", id="a boolean as JSON true, not True"),
        pytest.param("[{{inputs.nothing}}]", "[null]", id="null as JSON null, not None"),
        pytest.param("t={{inputs.tags}}", 't=["x","y"]', id="a list as compact JSON"),
        pytest.param("m={{inputs.meta}}", 'm={"k":"v","é":"ü"}', id="unicode kept as is"),
        pytest.param("Hi {{inputs.name}}", "Hi Ada", id="a string without quotes"),
        pytest.param("{{inputs.name}}{{inputs.n}}", "Ada3", id="two templates, no text: text"),
        pytest.param(" {{inputs.n}}", " 3", id="a leading space makes it text"),
        pytest.param("{{inputs.n}} of {{steps.fetch.output.count}} ({{steps.fetch.status}})",
                     "3 of 2 (completed)", id="several in one string"),
    ],
)
def test_a_template_inside_longer_text_is_interpolated(template: str, expected: str) -> None:
    assert render(template, CONTEXT) == expected


def test_render_leaves_other_values_and_its_input_alone() -> None:
    payload = {"k": [1, 2.5, True, None, {"s": "plain"}], "t": "{{inputs.tags}}"}
    before = copy.deepcopy(payload)
    assert render(payload, CONTEXT) == {"k": [1, 2.5, True, None, {"s": "plain"}],
                                        "t": ["x", "y"]}
    assert payload == before


@pytest.mark.parametrize(
    ("template", "message"),
    [
        pytest.param("{{inputs.missing}}", "inputs.missing is missing: inputs has no key "
                     "'missing'", id="a missing input"),
        pytest.param("{{steps.fetch.output.items.5.name}}", "steps.fetch.output.items.5.name is "
                     "missing: steps.fetch.output.items has 2 item(s), no index 5",
                     id="an index past the end"),
        pytest.param("{{steps.fetch.output.items.first}}", "steps.fetch.output.items is a list; "
                     "'first' is no index", id="a name used on a list"),
        pytest.param("{{steps.fetch.output.count.x}}", "steps.fetch.output.count is a number, "
                     "with no fields", id="a path through a number"),
        pytest.param("{{steps.fetch.output.items.1.score}}", "steps.fetch.output.items.1 has no "
                     "key 'score'", id="a key one item has and another lacks"),
        pytest.param("{{steps.later.output.x}}", "step later has no result",
                     id="a step that has not run"),
        pytest.param("{{steps.broke.output.x}}", "steps.broke.output is null, with no fields",
                     id="a failed step's output is not null-propagated"),
        pytest.param("see {{inputs.missing}}", "inputs.missing is missing",
                     id="interpolation names the path too"),
        pytest.param("{{inputs.tags.99999999999}}", "no index 99999999999",
                     id="a huge index is out of range, not an int() error"),
    ],
)
def test_a_missing_path_is_an_error_naming_it(template: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        render({"field": template}, CONTEXT)
    assert message in str(caught.value)


def test_a_skipped_steps_output_reads_as_null_at_any_depth() -> None:
    assert render("{{steps.maybe.output}}", CONTEXT) is None
    assert render("{{steps.maybe.output.deep.0.path}}", CONTEXT) is None
    assert render("got {{steps.maybe.output.x}}", CONTEXT) == "got null"
    assert render("{{steps.maybe.status}}", CONTEXT) == "skipped"


def test_a_context_that_is_not_an_object_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="the context is not an object"):
        render("{{inputs.x}}", [])  # type: ignore[arg-type]


def test_a_value_that_is_not_json_is_a_template_error_when_interpolated() -> None:
    with pytest.raises(TemplateError, match="not JSON"):
        render("x={{inputs.s}}", {"inputs": {"s": {1, 2}}})


def test_payloads_nested_past_the_limit_are_refused_not_recursed_into() -> None:
    deep: Any = "{{inputs.n}}"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(TemplateError, match="nested more than"):
        references(deep)
    with pytest.raises(TemplateError, match="nested more than"):
        render(deep, CONTEXT)


def test_template_errors_are_permanent_workflow_errors() -> None:
    from tasks.engine.errors import PermanentError

    assert issubclass(TemplateError, WorkflowError)
    assert issubclass(TemplateError, PermanentError)


def test_parse_path_splits_on_dots() -> None:
    assert parse_path(" steps.my-step_2.output.a.0 ") == ("steps", "my-step_2", "output", "a", "0")
    with pytest.raises(TemplateError):
        resolve((), CONTEXT)


# Hypothesis: whatever JSON the context holds and whatever the template text, render and
# references raise TemplateError or nothing.

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["a", "b", "0", "1", "output", "status"]) | st.text(
        max_size=4), inner, max_size=4),
    max_leaves=20,
)
SEGMENTS = st.sampled_from(["inputs", "steps", "a", "b", "output", "status", "0", "1", "99",
                            "x-y", "", " ", "..", "{{", "}}", "\\"])
STEP_ENTRY = st.fixed_dictionaries(
    {"status": st.sampled_from(["completed", "failed", "skipped"]) | JSON, "output": JSON})
CONTEXTS = st.one_of(
    JSON,
    st.fixed_dictionaries({"inputs": JSON,
                           "steps": st.dictionaries(st.sampled_from(["a", "b"]),
                                                    STEP_ENTRY | JSON, max_size=2) | JSON}),
)
TEXTS = st.one_of(
    st.text(max_size=40),
    st.lists(SEGMENTS, max_size=6).map(lambda parts: "{{" + ".".join(parts) + "}}"),
    st.lists(SEGMENTS | st.text(max_size=3), max_size=10).map("".join),
)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=3), context=CONTEXTS)
def test_render_raises_nothing_but_template_error(texts: list[str], context: Any) -> None:
    try:
        references(texts)
        render(texts, context)
    except TemplateError:
        pass


@settings(max_examples=200, deadline=None)
@given(path=st.lists(SEGMENTS, min_size=1, max_size=6), context=CONTEXTS)
def test_resolving_any_path_in_any_context_raises_nothing_but_template_error(
        path: list[str], context: Any) -> None:
    with contextlib.suppress(TemplateError):
        resolve(tuple(path), context)
