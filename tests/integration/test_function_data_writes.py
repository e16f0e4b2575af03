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
