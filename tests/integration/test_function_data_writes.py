"""A function's update() or delete() whose answer would be over the cap changes nothing:
it is never told "error" about a write that happened."""

from __future__ import annotations

from tasks.functions import data
from tests.integration.jobdb import tuples


def test_an_update_whose_answer_is_too_big_is_rolled_back(project) -> None:
    # Given six documents of 200 KiB each (1.2 MiB together)
    for i in range(6):
        done = data.run(project, {"table": "function_data", "op": "insert",
                                  "values": {"collection": "big", "doc": {"n": i,
                                                                          "pad": "x" * 200_000}}},
                        seed=f"seed-{i}")
        assert done["error"] is None, done
    # When one update touches all of them, returning whole rows
    answer = data.run(project, {"table": "function_data", "op": "update",
                                "values": {"collection": "moved"},
                                "filters": [["eq", "collection", "big"]]}, seed="u")
    # Then it is refused saying nothing changed, and nothing did
    assert answer["data"] is None and "nothing was changed" in answer["error"]["message"]
    assert tuples("SELECT count(*) FROM function_data WHERE project_id = %s "
                  "AND collection = 'big'", (project,)) == [(6,)]
    # And asking for ids only, it goes through
    slim = data.run(project, {"table": "function_data", "op": "delete", "columns": "id",
                              "filters": [["eq", "collection", "big"]]}, seed="d")
    assert slim["error"] is None and len(slim["data"]) == 6
    assert tuples("SELECT count(*) FROM function_data WHERE project_id = %s",
                  (project,)) == [(0,)]


def test_a_query_past_its_time_is_stopped_and_changes_nothing(project, monkeypatch) -> None:
    # Issue 25.6: every db tool statement under a statement_timeout of its own.
    monkeypatch.setattr(data, "STATEMENT_TIMEOUT_MS", 200)
    for i in range(3):
        assert data.run(project, {"table": "function_data", "op": "insert",
                                  "values": {"collection": "c", "doc": {"n": i}}},
                        seed=f"s{i}")["error"] is None
    # A filter whose value is computed slowly by PostgreSQL: pg_sleep through a cast is
    # impossible from the tool, so the slow statement is made by the test's own hook
    real = data._capped

    def slow(statement):
        sql, params = real(statement)
        return sql.replace("SELECT q.*", "SELECT pg_sleep(1), q.*", 1), params

    monkeypatch.setattr(data, "_capped", slow)
    answer = data.run(project, {"table": "function_data", "op": "update",
                                "values": {"collection": "moved"},
                                "filters": [["eq", "collection", "c"]]}, seed="u")
    assert answer["data"] is None and answer["error"]["code"] == "57014"
    assert "stopped (nothing was changed)" in answer["error"]["message"]
    assert tuples("SELECT count(*) FROM function_data WHERE project_id = %s "
                  "AND collection = 'c'", (project,)) == [(3,)]
    read = data.run(project, {"table": "function_data", "op": "select",
                              "filters": [["eq", "collection", "c"]]}, seed="r")
    assert read["error"]["code"] == "57014"
