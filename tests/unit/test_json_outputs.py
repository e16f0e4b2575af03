"""What a step may return: JSON that PostgreSQL's jsonb will store, or a clear PermanentError."""

from __future__ import annotations

import json

import pytest

from tasks.engine.context import describe_error, to_json
from tasks.engine.errors import PermanentError


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"n": 1, "xs": [1.5, None, True]}, id="plain JSON round-trips"),
        pytest.param("a literal \\u0000 (backslash-u) is text, not NUL", id="escaped backslash"),
        pytest.param("é ☃ 🚂", id="non-ASCII is fine"),
        pytest.param(None, id="None is a valid step output"),
    ],
)
def test_storable_values_are_encoded(value: object) -> None:
    assert json.loads(to_json(value, "x")) == value


@pytest.mark.parametrize(
    ("value", "match"),
    [
        pytest.param(float("nan"), "not JSON-serialisable", id="NaN: json.dumps writes it, "
                     "jsonb refuses it"),
        pytest.param({"x": float("inf")}, "not JSON-serialisable", id="Infinity: same"),
        pytest.param("a\x00b", "NUL character", id="NUL: jsonb cannot hold \\u0000"),
        pytest.param(["ok", {"deep": "\\\x00"}], "NUL character",
                     id="NUL after a real backslash is still NUL"),
        pytest.param({1, 2}, "not JSON-serialisable", id="a set is not JSON"),
        pytest.param(object(), "not JSON-serialisable", id="arbitrary objects are not JSON"),
    ],
)
def test_unstorable_values_fail_permanently_naming_what(value: object, match: str) -> None:
    with pytest.raises(PermanentError, match=f"the output of step 'fetch' .*{match}"):
        to_json(value, "the output of step 'fetch'")


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        pytest.param(ValueError("boom"), "ValueError: boom", id="type and message"),
        pytest.param(KeyError("k"), "KeyError: 'k'", id="KeyError's repr-ish str"),
        pytest.param(RuntimeError(), "RuntimeError", id="no message: just the type"),
        pytest.param(ValueError("a\x00b"), "ValueError: a\\x00b",
                     id="NUL escaped: a text column cannot hold it"),
    ],
)
def test_describe_error(exc: BaseException, text: str) -> None:
    assert describe_error(exc) == text


@pytest.mark.parametrize(("args", "storable"), [
    pytest.param({"note": "a literal backslash-u0000: \\u0000"}, True,
                 id="an escaped backslash before u0000 is text, not NUL"),
    pytest.param({"note": "half an emoji \ud83d"}, False, id="a lone surrogate jsonb refuses"),
    pytest.param({"note": "nul \x00"}, False, id="a real NUL"),
])
def test_effect_args_pass_the_same_check_as_step_outputs(args: dict, storable: bool) -> None:
    from tasks.services.effects.ledger import _plain_json

    if storable:
        assert _plain_json(args) == args
        to_json(args, "x")
    else:
        with pytest.raises(PermanentError):
            _plain_json(args)
        with pytest.raises(PermanentError):
            to_json(args, "x")
