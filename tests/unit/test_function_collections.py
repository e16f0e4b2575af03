"""Tables of a function's own naming (tasks/functions/collections.py, pure): names are
checked, values and field names are parameters, nothing the JavaScript says is SQL text."""

from __future__ import annotations

import pytest

from tasks.functions.collections import build, name_of, project
from tasks.functions.tables import QueryProblem

PID = "00000000-0000-0000-0000-0000000000aa"
HOSTILE = ["x'); DROP TABLE projects; --", "a b", "doc->>'x'", "1abc", "é", "a" * 64]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_table_or_field_name_is_an_identifier_or_refused(name: str) -> None:
    with pytest.raises(QueryProblem):
        name_of(name)
    for request in ({"filters": [["eq", name, 1]]}, {"columns": name},
                    {"order": {"column": name}}, {"op": "insert", "values": {name: 1}}):
        with pytest.raises(QueryProblem):
            build(PID, "leads", request, "seed")


def test_an_empty_table_name_is_refused() -> None:
    with pytest.raises(QueryProblem):
        name_of("")


def test_values_and_field_names_travel_as_parameters() -> None:
    sneaky = "'; DELETE FROM function_data; --"
    q = build(PID, "leads", {"filters": [["eq", "email", sneaky], ["gt", "score", 3],
                                         ["like", "name", sneaky], ["in", "tag", [sneaky]],
                                         ["or", None, "source.eq.web,score.lt.2"]],
                             "order": {"column": "score", "ascending": False}}, "s")
    assert sneaky not in q.sql and "email" not in q.sql and "score" not in q.sql
    assert PID in q.params and "leads" in q.params
    assert "t.project_id = %s" in q.sql and "t.collection = %s" in q.sql


def test_writes_need_a_filter_and_server_fields_are_the_servers() -> None:
    with pytest.raises(QueryProblem, match="needs a filter"):
        build(PID, "leads", {"op": "delete"}, "s")
    with pytest.raises(QueryProblem, match="set by the server"):
        build(PID, "leads", {"op": "update", "values": {"created_at": "x"},
                             "filters": [["eq", "a", 1]]}, "s")
    with pytest.raises(QueryProblem, match="or\\(\\)"):
        build(PID, "leads", {"filters": [["or", None, "a.drop.1"]]}, "s")


def test_a_projection_keeps_the_asked_fields_in_order() -> None:
    row = {"id": "1", "email": "a", "score": 2}
    assert project(row, ["score", "email", "missing"]) == {"score": 2, "email": "a",
                                                           "missing": None}
    assert project(row, None) == row
