"""Quotas per owner the operator sets: a request past one is refused naming the limit, and
other owners are not touched by it."""

from __future__ import annotations

from app.web import create_app
from tasks.settings import get_settings
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
