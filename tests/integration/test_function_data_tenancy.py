"""A row's identity is (project, id): each project's insert and upsert behave as if it had
function_data to itself. Another tenant's row with the same id neither swallows a write nor
tells that it exists; a duplicate id in the project itself is PostgREST's 23505, not a
silent empty success; the same call repeated after a crash still finds its own rows."""

from __future__ import annotations

import uuid
from typing import Any

from tasks.engine import pg
from tasks.functions import data
from tests.integration.jobdb import tuples

ROW_ID = "7d1f3c1e-0000-4000-8000-00000000b0b0"


def other_project() -> str:
    owner, project = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, f"o-{owner[:8]}"))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'theirs')",
               (project, owner))
    return project


def insert(project: str, values: Any, *, seed: str, table: str = "users") -> dict[str, Any]:
    return data.run(project, {"table": table, "op": "insert", "values": values}, seed=seed)


def upsert(project: str, values: Any, *, seed: str, table: str = "users",
           on_conflict: str | None = None) -> dict[str, Any]:
    request = {"table": table, "op": "upsert", "values": values, "on_conflict": on_conflict}
    return data.run(project, request, seed=seed)


def docs(project: str) -> list[tuple[str, str, Any]]:
    return [(str(i), c, d) for i, c, d in tuples(
        "SELECT id, collection, doc FROM function_data WHERE project_id = %s ORDER BY doc::text",
        (project,))]


def test_the_same_explicit_id_inserts_in_each_project(project) -> None:
    # Given tenant A's row with an explicit id
    theirs = other_project()
    mine = insert(theirs, {"id": ROW_ID, "owner": "a"}, seed="job-a:0")
    assert mine["error"] is None and [r["owner"] for r in mine["data"]] == ["a"]
    # When tenant B inserts a row with the same id
    answer = insert(project, {"id": ROW_ID, "owner": "b"}, seed="job-b:0")
    # Then B's row is written and returned, as if B had the table to itself
    assert answer["error"] is None, answer
    assert [(r["id"], r["owner"]) for r in answer["data"]] == [(ROW_ID, "b")]
    assert docs(project) == [(ROW_ID, "users", {"owner": "b"})]
    # And A's row is untouched
    assert docs(theirs) == [(ROW_ID, "users", {"owner": "a"})]


def test_the_same_explicit_id_upserts_in_each_project(project) -> None:
    theirs = other_project()
    assert upsert(theirs, {"id": ROW_ID, "owner": "a"}, seed="job-a:0")["error"] is None
    answer = upsert(project, {"id": ROW_ID, "owner": "b"}, seed="job-b:0")
    assert answer["error"] is None, answer
    assert [(r["id"], r["owner"]) for r in answer["data"]] == [(ROW_ID, "b")]
    # A second upsert in B updates B's row only
    again = upsert(project, {"id": ROW_ID, "owner": "b2"}, seed="job-b:1")
    assert [(r["id"], r["owner"]) for r in again["data"]] == [(ROW_ID, "b2")]
    assert docs(project) == [(ROW_ID, "users", {"owner": "b2"})]
    assert docs(theirs) == [(ROW_ID, "users", {"owner": "a"})]


def test_an_upsert_on_a_field_with_another_tenants_id_inserts(project) -> None:
    theirs = other_project()
    assert insert(theirs, {"id": ROW_ID, "email": "x@example.com"}, seed="a:0")["error"] is None
    answer = upsert(project, {"id": ROW_ID, "email": "x@example.com", "n": 1}, seed="b:0",
                    on_conflict="email")
    assert answer["error"] is None, answer
    assert [(r["id"], r["n"]) for r in answer["data"]] == [(ROW_ID, 1)]


def test_seeded_ids_of_the_reserved_table_are_per_project_too(project) -> None:
    # The same seed in two projects makes the same id: each project still gets its row.
    theirs = other_project()
    request = {"table": "function_data", "op": "insert",
               "values": {"collection": "notes", "doc": {"who": "a"}}}
    assert data.run(theirs, request, seed="same")["error"] is None
    request["values"] = {"collection": "notes", "doc": {"who": "b"}}
    answer = data.run(project, request, seed="same")
    assert answer["error"] is None and [r["doc"] for r in answer["data"]] == [{"who": "b"}]
    assert docs(project)[0][1:] == ("notes", {"who": "b"})


def duplicate(answer: dict[str, Any], row_id: str = ROW_ID) -> None:
    """PostgREST's answer to a duplicate primary key, as supabase-js hands it on."""
    assert answer["data"] is None, answer
    error = answer["error"]
    assert error["code"] == "23505", error
    assert "duplicate key value violates unique constraint" in error["message"]
    assert error["details"] == f"Key (id)=({row_id}) already exists."


def test_an_id_already_in_the_project_is_a_duplicate_key_error(project) -> None:
    assert insert(project, {"id": ROW_ID, "owner": "first"}, seed="job-1:0")["error"] is None
    # Another call inserting the same id, beside a new row: neither is written
    other = "7d1f3c1e-0000-4000-8000-00000000c0c0"
    answer = insert(project, [{"id": other, "owner": "new"}, {"id": ROW_ID, "owner": "second"}],
                    seed="job-2:0")
    duplicate(answer)
    assert docs(project) == [(ROW_ID, "users", {"owner": "first"})]


def test_an_id_of_another_table_of_the_project_is_a_duplicate_key_error(project) -> None:
    # function_data holds every table of the project: an id names one row in the project
    assert insert(project, {"id": ROW_ID, "owner": "u"}, seed="job-1:0")["error"] is None
    duplicate(insert(project, {"id": ROW_ID, "email": "e"}, seed="job-2:0", table="leads"))
    duplicate(upsert(project, {"id": ROW_ID, "email": "e"}, seed="job-3:0", table="leads"))
    assert docs(project) == [(ROW_ID, "users", {"owner": "u"})]


def test_the_same_id_twice_in_one_insert_is_a_duplicate_key_error(project) -> None:
    duplicate(insert(project, [{"id": ROW_ID, "n": 1}, {"id": ROW_ID, "n": 2}], seed="j:0"))
    assert docs(project) == []


def test_the_same_call_repeated_after_a_crash_finds_its_own_rows(project) -> None:
    # A call whose answer was not recorded runs again with the same seed: it is not told
    # that its own rows are duplicates, and nothing is added twice.
    values = [{"id": ROW_ID, "n": 1}, {"n": 2}]
    first = insert(project, values, seed="job-1:4")
    again = insert(project, values, seed="job-1:4")
    assert again == first and again["error"] is None
    assert len(docs(project)) == 2
