"""A document a function writes is checked by the one storable-JSON rule (tasks.engine.storable),
answered as the author's problem, and capped in size."""

from __future__ import annotations

import pytest

from tasks.functions.tables import DOC_MAX, QueryProblem, storable_json


def test_the_text_of_an_escape_is_storable() -> None:
    # A backslash then "u0000" is six ordinary characters, not a NUL.
    assert storable_json({"a": "\\u0000"}, "doc") == '{"a": "\\\\u0000"}'


@pytest.mark.parametrize(("value", "words"), [
    ({"a": "\x00"}, "NUL"),
    ({"a": "\ud800"}, "lone surrogate"),
    (float("nan"), "not JSON-serialisable"),
    ("x" * DOC_MAX, f"over the cap of {DOC_MAX}"),
])
def test_what_postgresql_cannot_store_is_a_query_problem(value: object, words: str) -> None:
    with pytest.raises(QueryProblem, match=words):
        storable_json(value, "row 0: doc")
