"""Artifacts: written as a step by a real worker (once, through retries), listed and downloaded
by their owner only, never served as a page of this origin."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.services import artifact_store, artifacts
from tasks.settings import get_settings
from tests.integration.jobdb import new_job, started_steps, wait_for

REPORT = "Q3 findings\nrevenue up\n"


def _auth(owner: str) -> dict[str, str]:
    with session_scope(session_factory()) as session:
        _, token = create_token(session, owner)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(db) -> FlaskClient:
    return create_app().test_client()


@pytest.fixture
def alice(client: FlaskClient) -> tuple[dict[str, str], str]:
    auth = _auth("alice")
    return auth, client.post("/api/projects", headers=auth, json={"name": "A"}).json["id"]


def _rows(job_id) -> list[dict]:
    return pg.fetch_dicts("SELECT * FROM artifacts WHERE job_id = %s ORDER BY step_seq",
                          (job_id,))


def _artifact_events(job_id) -> list[dict]:
    return [r["data"] for r in pg.fetch_dicts(
        "SELECT data FROM agent_job_events WHERE job_id = %s AND type = 'artifact' ORDER BY id",
        (job_id,))]


def _stored_files(project: str) -> list[Path]:
    root = get_settings().data_dir / "artifacts" / project
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture
def puts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each key was handed to the store (the worker runs in this process)."""
    calls: Counter[str] = Counter()
    real = artifact_store.LocalStore.put

    def counting(self, key: str, data: bytes, content_type: str) -> None:
        calls[key] += 1
        real(self, key, data, content_type)

    monkeypatch.setattr(artifact_store.LocalStore, "put", counting)
    return calls


def test_a_retried_job_stores_its_artifact_once(worker, alice, client, puts) -> None:
    # Given a job that writes a report and then fails on its first attempt
    auth, pid = alice
    job_id = new_job(pid, "test.artifact_writer", {
        "files": [{"name": "q3.txt", "text": REPORT}], "fail_first_attempts": 1})

    # When the worker runs it to the end (attempt 2 replays the write)
    row = wait_for(job_id)

    # Then it completed, and the step, the bytes, the row and the event each happened once
    assert (row["status"], row["attempts"]) == ("completed", 2)
    [artifact] = _rows(job_id)
    assert row["result"] == {"artifact_ids": [str(artifact["id"])]}
    assert started_steps(job_id).count("artifact:q3.txt") == 1
    assert list(puts.values()) == [1]
    digest = hashlib.sha256(REPORT.encode()).hexdigest()
    assert (artifact["sha256"], artifact["size"], artifact["kind"], artifact["step_seq"]) == (
        digest, len(REPORT.encode()), "report", 1)
    assert [p.name for p in _stored_files(pid)] == [digest]
    assert _artifact_events(job_id) == [{"id": str(artifact["id"]), "kind": "report",
                                         "name": "q3.txt", "content_type": "text/plain",
                                         "size": len(REPORT.encode())}]

    # And the owner sees it listed and gets the same bytes back
    listed = client.get(f"/api/jobs/{job_id}/artifacts", headers=auth)
    assert listed.status_code == 200
    assert listed.json == {"items": [{
        "id": str(artifact["id"]), "kind": "report", "name": "q3.txt",
        "content_type": "text/plain", "size": len(REPORT.encode()), "sha256": digest,
        "url": f"/api/artifacts/{artifact['id']}"}]}
    body = client.get(listed.json["items"][0]["url"], headers=auth)
    assert body.status_code == 200
    assert hashlib.sha256(body.data).hexdigest() == digest


def test_a_write_run_again_after_it_landed_keeps_one_row_and_one_copy(
        worker, project, puts, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the row's write lands but the step fails right after it (as a crash would leave it)
    real = pg.persist_one
    failed: list[str] = []

    def lands_then_fails(sql: str, params=None):
        result = real(sql, params)
        if "INSERT INTO artifacts" in sql and not failed:
            failed.append(str(result))
            raise RuntimeError("lost after the row was written")
        return result

    monkeypatch.setattr(artifacts.pg, "persist_one", lands_then_fails)
    job_id = new_job(project, "test.artifact_writer", {"files": [{"name": "a.txt"}]})

    # When the step runs again on the next attempt
    row = wait_for(job_id)

    # Then the second run found the same row and the same bytes
    assert (row["status"], row["attempts"]) == ("completed", 2)
    [artifact] = _rows(job_id)
    assert failed == [str({"id": artifact["id"]})]
    assert row["result"] == {"artifact_ids": [str(artifact["id"])]}
    assert list(puts.values()) == [2], "handed over twice, the second time a no-op"
    assert len(_stored_files(project)) == 1
    assert len(_artifact_events(job_id)) == 1, "the event goes with the step that completed"


FILES = [
    {"kind": "screenshot", "name": "home.png", "content_type": "image/png", "text": "PNG"},
    {"kind": "report", "name": "deck.pdf", "content_type": "application/pdf", "text": "%PDF"},
    {"kind": "page", "name": "index.html", "content_type": "text/html",
     "text": "<script>alert(document.cookie)</script>"},
    {"kind": "page", "name": "logo.svg", "content_type": "image/svg+xml",
     "text": "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>"},
    {"kind": "report", "name": "../../etc/Résumé \"final\".txt",
     "content_type": "Text/Plain; charset=utf-8", "text": "é"},
]


@pytest.fixture
def written(worker, alice) -> tuple[dict[str, str], str, dict[str, dict]]:
    auth, pid = alice
    job_id = new_job(pid, "test.artifact_writer", {"files": FILES})
    assert wait_for(job_id)["status"] == "completed"
    return auth, str(job_id), {r["name"]: r for r in _rows(job_id)}


@pytest.mark.parametrize(("name", "disposition", "sandboxed"), [
    ("home.png", "inline; filename=home.png", True),  # an image: shown, in a sandbox
    ("deck.pdf", "inline; filename=deck.pdf", False),  # a PDF viewer refuses a sandbox
    ("index.html", "attachment; filename=index.html", True),  # never a page of this origin
    ("logo.svg", "attachment; filename=logo.svg", True),  # SVG can carry script
    ("Résumé _final_.txt", "attachment; filename=\"Resume _final_.txt\"; "
     "filename*=UTF-8''R%C3%A9sum%C3%A9%20_final_.txt", True),  # the path is gone, UTF-8 kept
])
def test_a_download_is_the_stored_bytes_with_safe_headers(
        client, written, name: str, disposition: str, sandboxed: bool) -> None:
    auth, _, rows = written
    row = rows[name]
    response = client.get(f"/api/artifacts/{row['id']}", headers=auth)
    assert response.status_code == 200
    assert hashlib.sha256(response.data).hexdigest() == row["sha256"]
    assert response.headers["Content-Type"] == row["content_type"]
    assert response.headers["Content-Length"] == str(row["size"])
    assert response.headers["Content-Disposition"] == disposition
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert ("sandbox" in response.headers.get("Content-Security-Policy", "")) == sandboxed
    assert "private" in response.headers["Cache-Control"]


def test_the_content_type_is_stored_normalised(written) -> None:
    _, _, rows = written
    assert rows["Résumé _final_.txt"]["content_type"] == "text/plain; charset=utf-8"


def test_another_owner_gets_404_for_the_list_and_the_bytes(client, written) -> None:
    _, job_id, rows = written
    stranger = _auth("mallory")
    client.post("/api/projects", headers=stranger, json={"name": "M"})
    listed = client.get(f"/api/jobs/{job_id}/artifacts", headers=stranger)
    assert (listed.status_code, listed.json["error"]["code"]) == (404, "not_found")
    for row in rows.values():
        response = client.get(f"/api/artifacts/{row['id']}", headers=stranger)
        assert response.status_code == 404
        assert row["sha256"] not in response.get_data(as_text=True)
    assert client.get(f"/api/artifacts/{rows['home.png']['id']}").status_code == 401


@pytest.mark.parametrize("artifact_id", [
    "00000000-0000-0000-0000-000000000001", "not-a-uuid", "..%2f..%2fetc%2fpasswd"])
def test_an_unknown_artifact_is_404(client, alice, artifact_id: str) -> None:
    auth, _ = alice
    assert client.get(f"/api/artifacts/{artifact_id}", headers=auth).status_code == 404


def test_a_job_without_artifacts_lists_none(client, alice) -> None:
    auth, pid = alice
    job_id = new_job(pid, publish=False)
    assert client.get(f"/api/jobs/{job_id}/artifacts", headers=auth).json == {"items": []}


def test_bytes_gone_from_the_store_are_a_404_saying_so(client, written) -> None:
    auth, _, rows = written
    row = rows["deck.pdf"]
    (get_settings().data_dir / "artifacts" / row["storage_key"]).unlink()
    response = client.get(f"/api/artifacts/{row['id']}", headers=auth)
    assert (response.status_code, response.json["error"]["code"]) == (404, "artifact_missing")


def test_an_artifact_a_handler_may_not_write_fails_the_job_at_once(worker, project) -> None:
    job_id = new_job(project, "test.artifact_writer", {
        "files": [{"name": "x.bin", "content_type": "text/html\r\nSet-Cookie: a=b"}]})
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"].startswith("InvalidArtifact: artifact content type")
    assert _rows(job_id) == []
