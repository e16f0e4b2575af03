"""Quotas per owner the operator sets: a request past one is refused naming the limit, and
other owners are not touched by it."""

from __future__ import annotations

import uuid

import pytest

from app.web import create_app
from tasks.engine import pg
from tasks.functions import data
from tasks.services.memory import write_memory
from tasks.services.quotas import QuotaExceeded
from tasks.settings import get_settings
from tests.integration.jobdb import new_job, tuples, wait_for
from tests.integration.test_code_routes import _auth


def test_projects_per_owner_stop_at_the_quota(db, monkeypatch) -> None:
    monkeypatch.setenv("SWITCHYARD_MAX_PROJECTS_PER_OWNER", "2")
    get_settings.cache_clear()
    try:
        client = create_app().test_client()
        alice, bob = _auth("alice"), _auth("bob")
        made = [client.post("/api/projects", headers=alice, json={"name": f"p{i}"})
                for i in range(3)]
        assert [r.status_code for r in made] == [201, 201, 422]
        error = made[2].json["error"]
        assert error["code"] == "quota_exceeded"
        assert error["details"] == {"quota": "projects", "limit": 2}
        assert "SWITCHYARD_MAX_PROJECTS_PER_OWNER" in error["message"]
        assert len(client.get("/api/projects", headers=alice).json["items"]) == 2
        assert client.post("/api/projects", headers=bob, json={"name": "b"}).status_code == 201
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


@pytest.fixture
def quotas_of(settings_env):
    """Set quotas (env name → value) for the test, settings re-read (tests/conftest.py)."""
    return settings_env


def _other_owners_project() -> str:
    owner, project = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, f"other-{owner[:8]}"))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'theirs')",
               (project, owner))
    return project


def _second_project(owner: str) -> str:
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'second')",
               (project, owner))
    return project


def _insert(project: str, seed: str, size: int) -> dict:
    return data.run(project, {"table": "function_data", "op": "insert",
                              "values": {"doc": {"pad": "x" * size}}}, seed=seed)


def test_function_data_stops_at_the_owners_bytes_and_nothing_over_is_written(
        owner_and_project, quotas_of) -> None:
    quotas_of(SWITCHYARD_MAX_FUNCTION_DATA_BYTES_PER_OWNER="300000")
    owner, project = owner_and_project
    second, theirs = _second_project(owner), _other_owners_project()
    # Given 290 KB of documents in the owner's two projects (bytes of JSON, however well
    # they compress)
    assert _insert(project, "a", 200_000)["error"] is None
    assert _insert(second, "b", 90_000)["error"] is None
    # When another 20 KB goes into either, it is refused naming the quota
    over = _insert(second, "c", 20_000)
    assert over["data"] is None
    message = over["error"]["message"]
    assert "SWITCHYARD_MAX_FUNCTION_DATA_BYTES_PER_OWNER" in message and "300000" in message
    assert "nothing was written" in message
    assert tuples("SELECT count(*) FROM function_data WHERE project_id = %s", (second,)) == [(1,)]
    # And an update that grows a document past it is refused and rolled back too
    grow = data.run(project, {"table": "function_data", "op": "update",
                              "values": {"doc": {"pad": "y" * 250_000}},
                              "filters": [["neq", "collection", "none"]]}, seed="u")
    assert "function_data_bytes" in grow["error"]["message"]
    assert tuples("SELECT doc->>'pad' LIKE 'x%%' FROM function_data WHERE project_id = %s",
                  (project,)) == [(True,)]
    # While a small write fits, and another owner is not touched by this one's use
    assert _insert(second, "d", 5_000)["error"] is None
    assert _insert(theirs, "e", 200_000)["error"] is None


def test_memory_keys_stop_at_the_owners_quota_but_known_keys_still_change(
        owner_and_project, quotas_of) -> None:
    quotas_of(SWITCHYARD_MAX_MEMORY_KEYS_PER_OWNER="2")
    owner, project = owner_and_project
    write_memory(project, "fact", "a", "1")
    write_memory(_second_project(owner), "fact", "b", "1")
    with pytest.raises(QuotaExceeded) as over:
        write_memory(project, "fact", "c", "1")
    assert over.value.details() == {"quota": "memory_keys", "limit": 2}
    assert "SWITCHYARD_MAX_MEMORY_KEYS_PER_OWNER" in str(over.value)
    write_memory(project, "fact", "a", "2")  # an existing key is no new key
    assert tuples("SELECT key, content FROM agent_memory WHERE project_id = %s ORDER BY key",
                  (project,)) == [("a", "2")]
    write_memory(_other_owners_project(), "fact", "c", "1")


def test_an_artifact_past_the_owners_bytes_fails_its_job_naming_the_quota(
        worker, owner_and_project, quotas_of) -> None:
    quotas_of(SWITCHYARD_MAX_ARTIFACT_BYTES_PER_OWNER="1000")
    _, project = owner_and_project
    small = new_job(project, "test.artifact_writer",
                    {"files": [{"name": "a.txt", "text": "x" * 600}]})
    assert wait_for(small)["status"] == "completed"
    big = new_job(project, "test.artifact_writer",
                  {"files": [{"name": "b.txt", "text": "y" * 600}]})
    row = wait_for(big)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"].startswith("QuotaExceeded: quota exceeded")
    assert "SWITCHYARD_MAX_ARTIFACT_BYTES_PER_OWNER" in row["last_error"]
    assert tuples("SELECT count(*) FROM artifacts WHERE job_id = %s", (big,)) == [(0,)]
