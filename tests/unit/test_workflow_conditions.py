"""The condition language: truth tables, precedence, quoting, strict types, errors with columns."""

from __future__ import annotations

import builtins
import contextlib
import pickle
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.workflows.conditions import (
    MAX_DEPTH,
    MAX_LENGTH,
    ConditionError,
    evaluate,
    parse,
    references,
)
from tasks.workflows.errors import WorkflowError

CONTEXT: dict[str, Any] = {
    "inputs": {"n": 3, "ratio": 0.5, "name": "Ada", "flag": True, "off": False,
               "nothing": None, "tags": ["x", "y"], "meta": {"k": "v"}},
    "steps": {
        "check": {"status": "completed",
                  "output": {"ok": True, "score": 7, "items": [{"name": "first"}]}},
        "maybe": {"status": "skipped", "output": None},
    },
}


def run(text: str, context: dict[str, Any] = CONTEXT) -> bool:
    return evaluate(parse(text), context)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("right", [True, False])
def test_and_or_truth_tables(left: bool, right: bool) -> None:
    words = {True: "true", False: "false"}
    assert run(f"{words[left]} and {words[right]}") is (left and right)
    assert run(f"{words[left]} or {words[right]}") is (left or right)
    assert run(f"not {words[left]}") is (not left)
    assert run(f"not not {words[left]}") is left


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("true or false and false", True, id="and binds tighter than or"),
        pytest.param("(true or false) and false", False, id="parentheses override"),
        pytest.param("false and false or true", True, id="left and first, then or"),
        pytest.param("not false and false", False, id="not binds tighter than and"),
        pytest.param("not (false and false)", True, id="not of a parenthesised and"),
        pytest.param("not 1 == 2", True, id="not is looser than a comparison"),
        pytest.param("not inputs.n in [1, 2]", True, id="not applies to the whole in"),
        pytest.param("1 == 1 and 2 < 3 or 1 > 2", True, id="comparisons bind tightest"),
        pytest.param("((((true))))", True, id="redundant parentheses"),
    ],
)
def test_precedence(text: str, expected: bool) -> None:
    assert run(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("inputs.n == 3", True, id="equal integers"),
        pytest.param("inputs.n == 3.0", True, id="an integer equals the same float"),
        pytest.param("inputs.n != 4", True, id="unequal integers"),
        pytest.param("inputs.ratio < 1", True, id="a float below an integer"),
        pytest.param("inputs.n <= 3 and inputs.n >= 3", True, id="both bounds inclusive"),
        pytest.param("inputs.n > 3", False, id="strictly greater"),
        pytest.param("-1 < 0 and -1.5e2 == -150", True, id="negative and exponent literals"),
        pytest.param("'apple' < 'banana'", True, id="strings order by code point"),
        pytest.param("'B' < 'a'", True, id="upper case before lower case"),
        pytest.param("inputs.name == 'Ada'", True, id="equal strings"),
        pytest.param("inputs.flag == true", True, id="a boolean equals true"),
        pytest.param("inputs.flag == 1", False, id="true is not the number 1"),
        pytest.param("inputs.off == 0", False, id="false is not the number 0"),
        pytest.param("inputs.nothing == null", True, id="null equals null"),
        pytest.param("inputs.nothing == false", False, id="null is not false"),
        pytest.param("inputs.n == '3'", False, id="a number is not its text"),
        pytest.param("inputs.tags == ['x', 'y']", True, id="lists compare by items"),
        pytest.param("inputs.tags == ['y', 'x']", False, id="lists compare in order"),
        pytest.param("inputs.meta == inputs.meta", True, id="objects compare by content"),
        pytest.param("[1, true] == [1, 1]", False, id="equality inside lists is JSON's too"),
    ],
)
def test_comparisons(text: str, expected: bool) -> None:
    assert run(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("'x' in inputs.tags", True, id="membership in a list"),
        pytest.param("'z' not in inputs.tags", True, id="not in"),
        pytest.param("inputs.n in [1, 2, 3]", True, id="a list literal"),
        pytest.param("true in [1, 2]", False, id="true is not 1 in a list either"),
        pytest.param("'d' in inputs.name", True, id="a substring"),
        pytest.param("'k' in inputs.meta", True, id="a key of an object"),
        pytest.param("'v' in inputs.meta", False, id="an object's values are not its keys"),
        pytest.param("1 in []", False, id="the empty list holds nothing"),
    ],
)
def test_membership(text: str, expected: bool) -> None:
    assert run(text) is expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param(r"'it\'s'", "it's", id="an escaped single quote"),
        pytest.param(r'"say \"hi\""', 'say "hi"', id="an escaped double quote"),
        pytest.param("\"it's\"", "it's", id="a single quote inside double quotes"),
        pytest.param("'say \"hi\"'", 'say "hi"', id="double quotes inside single quotes"),
        pytest.param(r"'a\\b'", "a\\b", id="an escaped backslash"),
        pytest.param(r"'a\nb\tc\r'", "a\nb\tc\r", id="newline, tab, carriage return"),
        pytest.param("''", "", id="the empty string"),
        pytest.param("'été ✓'", "été ✓", id="unicode as is"),
        pytest.param("'and or not == ('", "and or not == (", id="keywords inside a string"),
    ],
)
def test_string_quoting_and_escapes(text: str, value: str) -> None:
    assert run(f"inputs.s == {text}", {"inputs": {"s": value}}) is True


def test_bare_paths_and_template_paths_are_the_same() -> None:
    assert parse("steps.check.output.ok") == parse("{{ steps.check.output.ok }}")
    assert run("{{steps.check.output.items.0.name}} == 'first'") is True
    assert run("steps.check.output.items.0.name == 'first'") is True
    assert run("steps.check.status == 'completed'") is True


def test_references_lists_every_path_read() -> None:
    expr = parse("steps.a.output.x == 1 and ({{steps.b.status}} == 'completed' "
                 "or inputs.n in [steps.c.output.k, 2]) and not steps.d-e.output.ok")
    assert references(expr) == {("steps", "a", "output", "x"), ("steps", "b", "status"),
                                ("inputs", "n"), ("steps", "c", "output", "k"),
                                ("steps", "d-e", "output", "ok")}
    assert references(parse("1 == 1")) == set()


def test_a_skipped_steps_output_is_null_and_its_status_says_skipped() -> None:
    assert run("steps.maybe.output.ok == null") is True
    assert run("steps.maybe.output.ok != true") is True
    assert run("steps.maybe.status == 'skipped'") is True


def test_and_or_short_circuit_so_a_guarded_path_is_never_read() -> None:
    assert run("false and steps.absent.output.x") is False
    assert run("true or steps.absent.output.x") is True
    assert run("'missing' in steps.check.output and steps.check.output.missing > 1") is False
    with pytest.raises(ConditionError, match=r"steps\.absent\.output\.x is missing"):
        run("true and steps.absent.output.x")


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        pytest.param("inputs.n < 'a'", 10, "< orders two numbers or two strings, not a number "
                     "and a string", id="a number against a string"),
        pytest.param("inputs.flag > 0", 13, "not a boolean and a number",
                     id="a boolean is not a number"),
        pytest.param("inputs.nothing >= 1", 16, "not null and a number", id="null is unordered"),
        pytest.param("inputs.tags < inputs.tags", 13, "not a list and a list",
                     id="lists are unordered"),
        pytest.param("inputs.n", 1, "the condition needs true or false, got a number",
                     id="a number is not a condition"),
        pytest.param("steps.maybe.output.ok", 1, "got null", id="null is not false"),
        pytest.param("true and inputs.name", 10, "and needs true or false, got a string",
                     id="and needs booleans"),
        pytest.param("not inputs.tags", 5, "not needs true or false, got a list",
                     id="not needs a boolean"),
        pytest.param("1 in inputs.name", 3, "a substring: a string, not a number",
                     id="a number in a string"),
        pytest.param("1 in inputs.meta", 3, "a key: a string, not a number",
                     id="a number as a key"),
        pytest.param("'x' in inputs.n", 5, "in looks into a list, a string or an object, "
                     "not a number", id="in a number"),
        pytest.param("  inputs.missing == 1", 3, "inputs.missing is missing: inputs has no key",
                     id="a missing path, at its column"),
        pytest.param("steps.check.output.items.3.name == 1", 1, "has 1 item(s), no index 3",
                     id="an index past the end"),
    ],
)
def test_evaluation_errors_name_the_problem_and_its_column(text: str, column: int,
                                                           message: str) -> None:
    expr = parse(text)
    with pytest.raises(ConditionError) as caught:
        evaluate(expr, CONTEXT)
    assert caught.value.column == column
    assert message in caught.value.message
    assert f"(column {column})" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        pytest.param("", 1, "empty", id="empty"),
        pytest.param("   ", 1, "empty", id="blank"),
        pytest.param("inputs.n = 3", 10, "compare with ==", id="a lone ="),
        pytest.param("!inputs.flag", 1, "write != or not", id="a lone !"),
        # JavaScript, as models write conditions: said as such, with this language's word
        pytest.param("inputs.n === 3", 10, "=== is JavaScript: compare with ==", id="==="),
        pytest.param("inputs.n !== 3", 10, "!== is JavaScript: compare with !=", id="!=="),
        pytest.param("true && false", 6, "&& is JavaScript: write and", id="&&"),
        pytest.param("true || false", 6, "|| is JavaScript: write or", id="||"),
        pytest.param("inputs.n == 3 == 3", 15, "do not chain", id="chained comparisons"),
        pytest.param("1 < 2 < 3", 7, "do not chain", id="chained orderings"),
        pytest.param("inputs.s == 'abc", 13, "never closed", id="unterminated string"),
        pytest.param(r"inputs.s == 'a\qb'", 15, r"unknown escape \q", id="unknown escape"),
        pytest.param("inputs.s == 'a\\", 13, "never closed", id="a backslash at the end"),
        pytest.param("(true", 6, "expected ) to close the ( at column 1", id="unclosed ("),
        pytest.param("true)", 5, "unexpected ')'", id="a stray )"),
        pytest.param("true and", 9, "expected a value, found the end", id="a dangling and"),
        pytest.param("and true", 1, "expected a value, found 'and'", id="a leading and"),
        pytest.param("true false", 6, "unexpected 'false'", id="two values in a row"),
        pytest.param("True", 1, "did you mean true?", id="Python's True"),
        pytest.param("None == null", 1, "unknown name 'None'", id="Python's None"),
        pytest.param("x == 1", 1, "unknown name 'x'", id="a bare name"),
        pytest.param("step.a.output.x", 1, "unknown name 'step'", id="a misspelt root"),
        pytest.param("steps.a.outputs.x", 1, "steps.<name>.output", id="a misspelt field"),
        pytest.param("steps.a", 1, "steps.<name>.output", id="a step alone"),
        pytest.param("{{inputs.x", 1, "never closed by }}", id="an unclosed template"),
        pytest.param("1 == {{env.x}}", 6, "starts with inputs or steps", id="a bad template"),
        pytest.param("12abc", 1, "malformed number", id="letters after digits"),
        pytest.param("1.", 1, "malformed number", id="a trailing dot"),
        pytest.param("- 1 == -1", 1, "- must start a number", id="a lone minus"),
        pytest.param("1e999 > 1", 1, "out of range", id="an infinite literal"),
        pytest.param("inputs.n in [1 2]", 16, "expected , or ]", id="a list without commas"),
        pytest.param("inputs.n in [1,", 16, "expected a value", id="an unclosed list"),
        pytest.param("inputs.n > .5", 12, "unexpected character '.'", id="a bare decimal"),
        pytest.param("a" * (MAX_LENGTH + 1), MAX_LENGTH + 1, f"at most {MAX_LENGTH}",
                     id="too long"),
        pytest.param("not " * (MAX_DEPTH + 1) + "true", 4 * MAX_DEPTH + 1,
                     f"nested more than {MAX_DEPTH}", id="too many nots"),
        pytest.param("(" * (MAX_DEPTH + 1) + "true" + ")" * (MAX_DEPTH + 1), MAX_DEPTH + 1,
                     f"nested more than {MAX_DEPTH}", id="too many parentheses"),
        pytest.param("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), MAX_DEPTH + 1,
                     f"nested more than {MAX_DEPTH}", id="too many nested lists"),
    ],
)
def test_parse_errors_name_the_problem_and_its_column(text: str, column: int,
                                                      message: str) -> None:
    with pytest.raises(ConditionError) as caught:
        parse(text)
    assert caught.value.column == column, str(caught.value)
    assert message in caught.value.message


def test_nesting_up_to_the_limit_is_fine() -> None:
    assert run("(" * MAX_DEPTH + "true" + ")" * MAX_DEPTH) is True
    assert run("not " * MAX_DEPTH + "true") is True
    assert run("1 == 1" + " " * (MAX_LENGTH - 6)) is True  # exactly MAX_LENGTH characters


def test_a_condition_that_is_not_text_is_a_condition_error() -> None:
    with pytest.raises(ConditionError, match="a condition is a string, not a number"):
        parse(3)  # type: ignore[arg-type]


def test_condition_errors_are_permanent_workflow_errors_that_survive_pickling() -> None:
    from tasks.engine.errors import PermanentError

    assert issubclass(ConditionError, WorkflowError)
    assert issubclass(ConditionError, PermanentError)
    copied = pickle.loads(pickle.dumps(ConditionError("bad", 7)))
    assert (copied.message, copied.column, str(copied)) == ("bad", 7, "bad (column 7)")


# Nothing is ever evaluated as code.

@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "exec('1')",
        "lambda: true",
        "().__class__.__bases__",
        "1 if true else 2",
        "[x for x in inputs.tags]",
        "inputs.n.__class__ == 1",
        "getattr(inputs, 'n')",
        "true; import os",
        "1 + 1 == 2",
        "inputs.tags[0] == 'x'",
    ],
)
def test_python_is_not_this_language(text: str) -> None:
    with pytest.raises(ConditionError):
        evaluate(parse(text), CONTEXT)


def test_a_path_reads_keys_never_attributes() -> None:
    # `inputs.__class__` parses (names may hold underscores) but only ever looks up a key.
    with pytest.raises(ConditionError, match="inputs has no key '__class__'"):
        run("inputs.__class__ == 1")
    assert run("inputs.__class__ == 1", {"inputs": {"__class__": 1}}) is True
    assert run("inputs.tags.__len__ == 1", {"inputs": {"tags": {"__len__": 1}}}) is True


def test_parse_and_evaluate_never_call_eval_exec_or_compile(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Python code was evaluated")

    for name in ("eval", "exec", "compile", "__import__"):
        monkeypatch.setattr(builtins, name, refuse)
    assert run("inputs.n in [1, 2, 3] and not (steps.check.output.score < 5)") is True
    with pytest.raises(ConditionError):
        parse("__import__('os')")


# Hypothesis: arbitrary text never crashes parse; parsed conditions on arbitrary JSON never
# crash evaluate; and evaluation agrees with an independent model of the precedence rules.

ALPHABET = st.sampled_from(
    ["inputs", "steps", ".", "a", "output", "status", "0", "x", "{{", "}}", "(", ")", "[", "]",
     ",", " ", "==", "!=", "<", "<=", ">", ">=", "=", "!", "and", "or", "not", "in", "true",
     "false", "null", "'", '"', "\\", "-", "1", "2.5", "e9", "é", "\n", "__import__"])
TEXT = st.one_of(st.text(max_size=60), st.lists(ALPHABET, max_size=25).map("".join),
                 st.lists(ALPHABET, max_size=25).map(" ".join))


@settings(max_examples=500, deadline=None)
@given(text=TEXT)
def test_parse_raises_nothing_but_condition_error(text: str) -> None:
    try:
        parse(text)
    except ConditionError as exc:
        assert 1 <= exc.column <= max(len(text), MAX_LENGTH) + 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["x", "ok", "0", "output", "status"]), inner, max_size=4),
    max_leaves=15,
)
WELL_SHAPED = st.fixed_dictionaries({  # every leaf below resolves: evaluation gets past paths
    "inputs": st.fixed_dictionaries({"x": JSON, "ok": st.booleans(), "0": JSON}),
    "steps": st.fixed_dictionaries({
        "a": st.fixed_dictionaries({"status": st.sampled_from(["completed", "skipped"]),
                                    "output": st.fixed_dictionaries({"ok": st.booleans()})}),
        "b": st.fixed_dictionaries({"status": st.just("skipped"), "output": JSON})}),
})
CONTEXTS = st.one_of(
    JSON,
    WELL_SHAPED,
    st.fixed_dictionaries({
        "inputs": JSON,
        "steps": st.dictionaries(
            st.sampled_from(["a", "b"]),
            st.fixed_dictionaries({"status": st.sampled_from(["completed", "skipped"]) | JSON,
                                   "output": JSON}) | JSON,
            max_size=2) | JSON}),
)
LEAVES = st.sampled_from(
    ["inputs.x", "inputs.ok", "inputs.0", "steps.a.output", "steps.a.output.ok",
     "steps.b.output.x.0", "steps.a.status", "{{steps.b.output.ok}}", "1", "-2.5", "'s'",
     "true", "false", "null", "[]", "[1, 'x', inputs.x]"])


def _expressions() -> st.SearchStrategy[str]:
    compare = st.tuples(LEAVES, st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in",
                                                 "not in"]), LEAVES).map(" ".join)
    return st.recursive(
        LEAVES | compare,
        lambda inner: st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join)
        | inner.map(lambda e: f"not {e}") | inner.map(lambda e: f"({e})"),
        max_leaves=8,
    )


@settings(max_examples=500, deadline=None)
@given(text=_expressions(), context=CONTEXTS)
def test_evaluate_on_any_json_context_returns_a_boolean_or_a_condition_error(
        text: str, context: Any) -> None:
    try:
        expr = parse(text)
    except ConditionError:
        return  # e.g. a chained comparison from two leaves meeting
    with contextlib.suppress(ConditionError):
        assert evaluate(expr, context) in (True, False)


@dataclass(frozen=True)
class Formula:
    """A boolean formula and the text that writes it with as few parentheses as allowed."""

    value: bool
    text: str
    level: int  # 0 or, 1 and, 2 not, 3 atom: how tightly its text binds


def _atom(value: bool) -> Formula:
    return Formula(value, "true" if value else "false", 3)


def _wrap(formula: Formula, needed: int) -> str:
    return formula.text if formula.level >= needed else f"({formula.text})"


def _combine(op: str, left: Formula, right: Formula) -> Formula:
    level = 0 if op == "or" else 1
    value = (left.value or right.value) if op == "or" else (left.value and right.value)
    # Left-associative: the right operand needs parentheses at its own level.
    return Formula(value, f"{_wrap(left, level)} {op} {_wrap(right, level + 1)}", level)


FORMULAS = st.recursive(
    st.booleans().map(_atom),
    lambda inner: st.tuples(st.sampled_from(["and", "or"]), inner, inner).map(
        lambda t: _combine(*t))
    | inner.map(lambda f: Formula(not f.value, f"not {_wrap(f, 2)}", 2)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(formula=FORMULAS)
def test_precedence_agrees_with_a_model_on_random_formulas(formula: Formula) -> None:
    assert run(formula.text) is formula.value, formula.text
