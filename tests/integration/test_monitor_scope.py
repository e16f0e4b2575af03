"""What one tenant may see of the others: /metrics, the monitor routes, diagnosis.

/metrics answers only the operator's SWITCHYARD_METRICS_TOKEN and is served from a
short-lived cache; the monitor and diagnosis show a tenant its own jobs, and an admin
token the fleet. Through Flask's test client against a real database.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from flask import Flask
from flask.testing import FlaskClient

from app.http.db import session_factory
from app.http.tokens import create_token, list_tokens
from app.ops import metrics
from app.ops.cli import main as cli
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.settings import get_settings
from tests.integration.test_ui_session import sign_in

METRICS_TOKEN = "metrics-" + "s3cret" * 4


def new_token(name: str, *, admin: bool = False) -> tuple[uuid.UUID, str]:
    with session_scope(session_factory()) as s:
        if admin:
            return create_token(s, name, admin=True)
        return create_token(s, name)


def new_project(owner_id: uuid.UUID, name: str) -> str:
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, %s)",
               (project, owner_id, name))
    return project


def add_job(project: str, *, status: str = "queued", worker: str | None = None,
            job_type: str = "system.canary", queue: str = "default", sent: bool = True,
            priority: int = 0) -> str:
    """A job row as the engine leaves it (queued and due, its wake-up sent unless `sent` is
    false: held back by its owner's cap; or running on `worker`). Each a moment after the
    one before, so that their order is the order they were added in."""
    job_id = str(uuid.uuid4())
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, queue, status, payload, "
               "idempotency_key, run_after, dispatched_at, locked_by, heartbeat_at, attempts, "
               "priority) "
               "VALUES (%s, %s, %s, %s, %s, '{}', %s, clock_timestamp() - interval '1 minute', "
               "CASE WHEN %s THEN clock_timestamp() - interval '1 minute' END, %s, "
               "CASE WHEN %s = 'running' THEN now() END, "
               "CASE WHEN %s = 'running' THEN 1 ELSE 0 END, %s)",
               (job_id, project, job_type, queue, status, job_id, sent, worker, status, status,
                priority))
    return job_id


def add_worker(name: str, queues: str = '["default"]') -> None:
    pg.execute("INSERT INTO worker_heartbeats (worker, hostname, pid, queues) "
               "VALUES (%s, 'host', 4242, %s::jsonb)", (name, queues))


@pytest.fixture
def app(db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Flask]:
    monkeypatch.setenv("SWITCHYARD_METRICS_TOKEN", METRICS_TOKEN)
    get_settings.cache_clear()
    metrics.forget()
    app = create_app()
    app.config["TESTING"] = True
    yield app
    monkeypatch.undo()
    get_settings.cache_clear()
    metrics.forget()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Fleet:
    """Alice has work on two workers; Bob has one queued job; one worker is idle."""

    def __init__(self) -> None:
        self.alice, self.alice_token = new_token("alice")
        self.bob, self.bob_token = new_token("bob")
        self.alice_project = new_project(self.alice, "alice's")
        self.bob_project = new_project(self.bob, "bob's")
        for name in ("w-alice", "w-shared", "w-idle"):
            add_worker(name)
        self.alice_jobs = [add_job(self.alice_project, job_type="secret.alice_type")
                           for _ in range(5)]
        self.alice_running = [add_job(self.alice_project, status="running", worker="w-alice",
                                      job_type="secret.alice_type"),
                              add_job(self.alice_project, status="running", worker="w-shared",
                                      job_type="secret.alice_type")]
        self.bob_running = add_job(self.bob_project, status="running", worker="w-shared")
        self.bob_queued = add_job(self.bob_project)  # behind Alice's five


@pytest.fixture
def fleet(client: FlaskClient) -> Fleet:
    return Fleet()


# --- /metrics -----------------------------------------------------------------------------------

def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, (response.status_code, response.get_data(True))
    body = response.get_json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert set(body["error"]) == {"code", "message", "details"}


def test_metrics_refuse_a_scrape_without_the_metrics_token(client: FlaskClient,
                                                           fleet: Fleet) -> None:
    for headers in ({}, bearer(fleet.alice_token), bearer(METRICS_TOKEN + "x"),
                    {"Authorization": METRICS_TOKEN}):
        response = client.get("/metrics", headers=headers)
        assert_error(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert b"secret.alice_type" not in response.data


def test_metrics_answer_the_metrics_token_with_fleet_aggregates(client: FlaskClient,
                                                                fleet: Fleet) -> None:
    add_job(fleet.bob_project, sent=False)
    add_job(fleet.alice_project, sent=False, queue="io")
    response = client.get("/metrics", headers=bearer(METRICS_TOKEN))
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert 'switchyard_jobs{job_type="secret.alice_type",status="queued"} 5.0' in text
    assert 'switchyard_jobs{job_type="secret.alice_type",status="running"} 2.0' in text
    assert "switchyard_stream_subscribers 0.0" in text
    assert 'switchyard_queue_held_back{queue="default"} 1.0' in text  # unsent: held back
    assert 'switchyard_queue_held_back{queue="io"} 1.0' in text


def test_metrics_are_off_until_the_operator_sets_a_token(
        client: FlaskClient, fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWITCHYARD_METRICS_TOKEN")
    get_settings.cache_clear()
    for headers in ({}, bearer(fleet.alice_token), bearer("")):
        assert_error(client.get("/metrics", headers=headers), 404, "metrics_disabled")


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the engine's pg helpers run from now on in this thread (they all go
    through fetch_dicts; a worker thread an earlier test started may be querying too)."""
    seen: list[str] = []
    me = threading.get_ident()

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(sql: Any, *args: Any, **kw: Any) -> Any:
            if threading.get_ident() == me:
                seen.append(str(sql))
            return fn(sql, *args, **kw)
        return counted

    monkeypatch.setattr(pg, "fetch_dicts", wrap(pg.fetch_dicts))
    return seen


def test_scrapes_within_the_cache_period_query_the_database_once(
        client: FlaskClient, fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(metrics, "clock", lambda: clock[0])
    statements = counting(monkeypatch)

    def reads() -> list[str]:
        return [s for s in statements if not s.startswith("INSERT")]  # not the test's own

    first = client.get("/metrics", headers=bearer(METRICS_TOKEN)).get_data(as_text=True)
    per_refresh = len(reads())
    assert per_refresh > 0
    add_job(fleet.bob_project)  # a change the cached figures do not show yet
    clock[0] += get_settings().metrics_cache_seconds / 2
    for _ in range(5):
        again = client.get("/metrics", headers=bearer(METRICS_TOKEN)).get_data(as_text=True)
        assert len(reads()) == per_refresh, reads()[per_refresh:]
    assert _line(again, "system.canary", "queued") == _line(first, "system.canary", "queued")

    clock[0] += get_settings().metrics_cache_seconds
    fresh = client.get("/metrics", headers=bearer(METRICS_TOKEN)).get_data(as_text=True)
    assert len(reads()) == 2 * per_refresh
    assert _line(fresh, "system.canary", "queued") == 2.0


def _line(text: str, job_type: str, status: str) -> float:
    prefix = f'switchyard_jobs{{job_type="{job_type}",status="{status}"}} '
    found = [line for line in text.splitlines() if line.startswith(prefix)]
    assert found, text
    return float(found[0].removeprefix(prefix))


# --- /api/monitor/* -----------------------------------------------------------------------------

def test_a_tenant_sees_only_its_own_jobs_in_the_queues(client: FlaskClient,
                                                       fleet: Fleet) -> None:
    body = client.get("/api/monitor/queues", headers=bearer(fleet.bob_token)).get_json()
    assert body["scope"] == "owner"
    assert [(r["job_type"], r["queued"], r["running"]) for r in body["items"]] == [
        ("system.canary", 1, 1)]
    assert "secret.alice_type" not in str(body)


def test_a_tenant_sees_only_the_workers_running_its_jobs_and_only_its_count(
        client: FlaskClient, fleet: Fleet) -> None:
    bob = client.get("/api/monitor/workers", headers=bearer(fleet.bob_token)).get_json()
    assert bob["scope"] == "owner"
    assert [(w["worker"], w["running"]) for w in bob["items"]] == [("w-shared", 1)]
    alice = client.get("/api/monitor/workers", headers=bearer(fleet.alice_token)).get_json()
    assert sorted((w["worker"], w["running"]) for w in alice["items"]) == [
        ("w-alice", 1), ("w-shared", 1)]
    _, stranger = new_token("carol")
    carol = client.get("/api/monitor/workers", headers=bearer(stranger)).get_json()
    assert carol["items"] == []


def test_an_admin_token_sees_the_fleet(client: FlaskClient, fleet: Fleet) -> None:
    _, admin = new_token("bob", admin=True)  # Bob's own ordinary token stays scoped
    workers = client.get("/api/monitor/workers", headers=bearer(admin)).get_json()
    assert workers["scope"] == "fleet"
    # (this session's in-process worker, if started, is in the fleet too)
    assert sorted((w["worker"], w["running"]) for w in workers["items"]
                  if w["worker"].startswith("w-")) == [
        ("w-alice", 1), ("w-idle", 0), ("w-shared", 2)]
    queues = client.get("/api/monitor/queues", headers=bearer(admin)).get_json()
    assert queues["scope"] == "fleet"
    assert sorted((r["job_type"], r["queued"], r["running"]) for r in queues["items"]) == [
        ("secret.alice_type", 5, 2), ("system.canary", 1, 1)]
    bob = client.get("/api/monitor/workers", headers=bearer(fleet.bob_token)).get_json()
    assert bob["scope"] == "owner"


def test_the_ui_session_carries_the_tokens_admin_flag(app: Flask, fleet: Fleet) -> None:
    _, admin = new_token("ops", admin=True)
    for token, scope, workers in ((fleet.bob_token, "owner", 1), (admin, "fleet", 3)):
        with app.test_client() as browser:
            sign_in(browser, token)
            body = browser.get("/api/monitor/workers").get_json()
            ours = [w for w in body["items"] if w["worker"].startswith("w-")]  # not the session's
            assert (body["scope"], len(ours)) == (scope, workers)
            page = browser.get("/monitor").get_data(as_text=True)
            assert f'data-scope="{scope}"' in page


# --- diagnosis ----------------------------------------------------------------------------------

def diagnosis(client: FlaskClient, token: str, job_id: str) -> dict[str, Any]:
    response = client.get(f"/api/jobs/{job_id}/diagnosis", headers=bearer(token))
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_diagnosis_counts_no_other_tenants_jobs_for_a_tenant(client: FlaskClient,
                                                             fleet: Fleet) -> None:
    body = diagnosis(client, fleet.bob_token, fleet.bob_queued)
    assert body["reason"] == "queued"
    assert body["facts"]["queued_ahead"] == 0  # none of Bob's own jobs is ahead of it
    assert "5" not in body["summary"], body["summary"]
    for name in ("w-alice", "w-shared", "w-idle", *fleet.alice_jobs):
        assert name not in str(body), name


def test_diagnosis_counts_the_whole_queue_for_an_admin(client: FlaskClient,
                                                       fleet: Fleet) -> None:
    _, admin = new_token("bob", admin=True)
    body = diagnosis(client, admin, fleet.bob_queued)
    assert body["facts"]["queued_ahead"] == 5
    assert "behind 5" in body["summary"]


def test_the_queues_say_how_many_jobs_wait_unsent(client: FlaskClient, fleet: Fleet) -> None:
    """Of a queue's due jobs, those held back in PostgreSQL (not sent to a worker: the owner's
    cap) are counted apart, so a long queue beside idle workers explains itself."""
    add_job(fleet.bob_project, sent=False)
    add_job(fleet.bob_project, sent=False)
    add_job(fleet.alice_project, sent=False, job_type="secret.alice_type")

    def rows(token: str) -> dict[str, tuple[int, int]]:
        response = client.get("/api/monitor/queues", headers=bearer(token))
        assert response.status_code == 200, response.get_json()
        return {r["job_type"]: (r["queued"], r["held_back"]) for r in response.get_json()["items"]}

    assert rows(fleet.bob_token) == {"system.canary": (3, 2)}  # bob_queued is sent
    _, admin = new_token("ops", admin=True)
    assert rows(admin) == {"system.canary": (3, 2), "secret.alice_type": (6, 1)}


def test_diagnosis_says_a_job_waits_for_its_owners_turn(client: FlaskClient, fleet: Fleet,
                                                        settings_env) -> None:
    """Held back in PostgreSQL by the owner's cap (tasks.engine.fair), a job waits for the
    owner's jobs to end, not for a worker: the sentence says so, with the owner's jobs sent
    and those that go before it (priority, then due time)."""
    settings_env(SWITCHYARD_OWNER_MAX_ACTIVE="2")
    # Bob holds two places: bob_running and bob_queued (sent)
    first = add_job(fleet.bob_project, sent=False)
    later = add_job(fleet.bob_project, sent=False)
    add_job(fleet.bob_project, sent=False, priority=5)  # added last, goes first
    add_job(fleet.bob_project, sent=False)  # behind it
    body = diagnosis(client, fleet.bob_token, later)
    assert body["reason"] == "owner_limit", body
    assert body["facts"]["owner_places"] == 2
    assert body["facts"]["owner_ahead"] == 2  # the priority-5 job and `first`
    assert "you have 2 job(s) running or sent" in body["summary"]
    assert "2 of your waiting job(s) go before it" in body["summary"]
    assert diagnosis(client, fleet.bob_token, first)["facts"]["owner_ahead"] == 1
    # A batch enqueued at once is due at one moment: its jobs go out in no set order
    batch = [str(uuid.uuid4()) for _ in range(3)]
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, queue, status, payload, "
               "idempotency_key, run_after, priority) SELECT id, %s, 'system.canary', "
               "'default', 'queued', '{}', id::text, now(), 0 FROM unnest(%s::uuid[]) id",
               (fleet.bob_project, batch))
    facts = diagnosis(client, fleet.bob_token, batch[1])["facts"]
    assert (facts["owner_ahead"], facts["owner_tied"]) == (4, 2)  # all the others, the batch's
    # One of Bob's places freed: the job's turn has come, it waits for the dispatch sweep
    pg.execute("UPDATE agent_jobs SET status = 'completed', completed_at = now() "
               "WHERE id = %s", (fleet.bob_running,))
    assert diagnosis(client, fleet.bob_token, later)["reason"] == "queued"


# --- the CLI ------------------------------------------------------------------------------------

def test_token_create_admin_makes_an_admin_token(db: None) -> None:
    result = CliRunner().invoke(cli, ["token", "create", "ops", "--admin"])
    assert result.exit_code == 0, result.output
    plain = CliRunner().invoke(cli, ["token", "create", "ops"])
    assert plain.exit_code == 0, plain.output
    with session_scope(session_factory()) as s:
        tokens = list_tokens(s)
    assert [t.admin for t in tokens] == [True, False]
    assert "admin" in CliRunner().invoke(cli, ["token", "list"]).output
