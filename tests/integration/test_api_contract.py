"""The HTTP contract (shared/API.md) through Flask's test client, against a real database.

Every refusal answers `{"error": {"code", "message", "details"}}` with the
documented status and writes nothing: the row counts of the tables a request
could touch are compared before and after.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.http import auth
from app.http.db import session_factory
from app.http.ratelimit import RateLimiter
from app.http.tokens import create_token, revoke_token
from app.web import MAX_BODY_BYTES, create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.settings import SettingsError, get_settings
from tests.conftest import wait_until
from tests.integration.jobdb import status_history, tuple_row

FUTURE = "2099-01-01T00:00:00+00:00"  # run_after that keeps a job queued: never dispatched
COUNTED = ("agent_jobs", "agent_job_events", "job_steps", "projects", "owners", "api_tokens")


@dataclass
class Caller:
    """A token holder: its owner, one project of its own, and a client that sends its token."""

    client: FlaskClient
    owner_id: uuid.UUID
    token: str
    project: str

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    def get(self, url: str, **kw: Any):
        return self.client.get(url, headers=self.headers(kw.pop("headers", None)), **kw)

    def post(self, url: str, body: Any = None, *, raw: bytes | str | None = None, **kw: Any):
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        return self.client.post(url, data=data, content_type="application/json",
                                headers=self.headers(kw.pop("headers", None)), **kw)

    def job(self, body: dict[str, Any] | None = None, **fields: Any) -> str:
        """Enqueue a job in this caller's project; returns its id."""
        r = self.post(f"/api/projects/{self.project}/jobs",
                      {"job_type": "system.canary", **(body or {}), **fields})
        assert r.status_code == 202, r.get_json()
        return r.get_json()["job_id"]


def counts() -> dict[str, int]:
    return {t: tuple_row(f"SELECT count(*) FROM {t}")[0] for t in COUNTED}


def flat(pages: list[list[str]]) -> list[str]:
    return [item for page in pages for item in page]


def new_token(name: str) -> tuple[uuid.UUID, str]:
    with session_scope(session_factory()) as s:
        return create_token(s, name)


def assert_error(response, status: int, code: str, *mentions: str) -> dict[str, Any]:
    """The contract's error body; each of `mentions` appears in the message or the details."""
    assert response.status_code == status, (response.status_code, response.get_data(True))
    assert response.is_json, response.get_data(True)
    body = response.get_json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error["details"], dict), error
    said = error["message"] + " " + json.dumps(error["details"])
    for word in mentions:
        assert word in said, f"{word!r} not named in {error}"
    return error


@pytest.fixture
def client(db: None) -> Iterator[FlaskClient]:
    app = create_app()
    app.config["TESTING"] = True
    with app.test_client() as c:
        yield c


def _caller(client: FlaskClient, name: str) -> Caller:
    owner_id, token = new_token(name)
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, %s)",
               (project, owner_id, f"{name}'s project"))
    return Caller(client, owner_id, token, project)


@pytest.fixture
def alice(client: FlaskClient) -> Caller:
    return _caller(client, "alice")


@pytest.fixture
def bob(client: FlaskClient) -> Caller:
    return _caller(client, "bob")


# --- request bodies ---------------------------------------------------------------------------

JOBS = "/api/projects/{pid}/jobs"
PROJECTS = "/api/projects"

BAD_BODIES = [
    # (url, raw body, status, code, words the error must name), reason
    pytest.param(PROJECTS, b'{"name": "x",', 400, "invalid_json", ("JSON",), id="truncated-json"),
    pytest.param(JOBS, b"job_type=system.canary", 400, "invalid_json", ("JSON",),
                 id="form-encoded-not-json"),
    pytest.param(JOBS, b"\xff\xfe{}", 400, "invalid_json", ("JSON",), id="not-utf8"),
    pytest.param(PROJECTS, b'["name"]', 400, "invalid_json", ("object",), id="array-not-object"),
    pytest.param(JOBS, b'"system.canary"', 400, "invalid_json", ("object",),
                 id="string-not-object"),
    pytest.param(PROJECTS, b"{}", 422, "validation_error", ("name", "required"),
                 id="project-name-missing"),
    pytest.param(PROJECTS, b'{"name": 5}', 422, "validation_error", ("name",),
                 id="project-name-not-a-string"),
    pytest.param(PROJECTS, b'{"name": ""}', 422, "validation_error", ("name",),
                 id="project-name-empty"),
    pytest.param(PROJECTS, b'{"name": "   "}', 422, "validation_error", ("name",),
                 id="project-name-blank"),
    pytest.param("/api/projects/{pid}/chat", b'{"message": " \\n "}', 422, "validation_error",
                 ("message",), id="chat-message-blank"),
    pytest.param(PROJECTS, b'{"name": "x", "night_shift": "yes"}', 422, "validation_error",
                 ("night_shift",), id="bool-given-as-string-is-not-coerced"),
    pytest.param(PROJECTS, b'{"name": "x", "colour": "red"}', 422, "validation_error",
                 ("colour",), id="unknown-field-refused"),
    pytest.param(JOBS, b"{}", 422, "validation_error", ("job_type", "required"),
                 id="job-type-missing"),
    pytest.param(JOBS, b'{"job_type": 7}', 422, "validation_error", ("job_type",),
                 id="job-type-not-a-string"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "payload": [1]}', 422,
                 "validation_error", ("payload",), id="payload-not-an-object"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "priority": "high"}', 422,
                 "validation_error", ("priority",), id="priority-not-an-int"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "priority": 10}', 422,
                 "validation_error", ("priority",), id="priority-out-of-range"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "max_attempts": 0}', 422,
                 "validation_error", ("max_attempts",), id="max-attempts-below-one"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "run_after": "tomorrow"}', 422,
                 "validation_error", ("run_after",), id="run-after-not-a-date"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "run_after": "2030-01-01T00:00:00"}',
                 422, "validation_error", ("run_after",), id="run-after-without-timezone"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "idempotency_key": ""}', 422,
                 "validation_error", ("idempotency_key",), id="empty-idempotency-key"),
    pytest.param(JOBS, b'{"job_type": "no.such.type"}', 422, "unknown_job_type",
                 ("job_type",), id="unknown-job-type"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "payload": {"steps": 0}}', 422,
                 "invalid_payload", ("payload", "steps"), id="payload-value-out-of-range"),
    pytest.param(JOBS, b'{"job_type": "system.canary", "payload": {"stepz": 3}}', 422,
                 "invalid_payload", ("payload", "stepz"), id="payload-unknown-field"),
]


@pytest.mark.parametrize(("url", "raw", "status", "code", "mentions"), BAD_BODIES)
def test_a_bad_body_is_refused_with_the_documented_error_and_writes_nothing(
        alice, url, raw, status, code, mentions):
    before = counts()

    r = alice.post(url.format(pid=alice.project), raw=raw)

    assert_error(r, status, code, *mentions)
    assert counts() == before


HUGE = "1" + "0" * 5000  # more digits than Python (or any double) takes in
UNSTORABLE_NUMBERS = [
    # (url, raw body, the field named), reason
    pytest.param(PROJECTS, '{"name": "x", "settings": {"llm_daily_usd_budget": Infinity}}',
                 "settings.llm_daily_usd_budget", id="infinity-in-a-setting"),
    pytest.param(PROJECTS, '{"name": "x", "settings": {"llm_daily_usd_budget": 1e999}}',
                 "settings.llm_daily_usd_budget", id="overflowing-exponent"),
    pytest.param(PROJECTS, '{"name": "x", "settings": {"caps": {"email_per_day": NaN}}}',
                 "settings.caps.email_per_day", id="nan-nested"),
    pytest.param(JOBS, '{"job_type": "system.canary", "payload": {"step_seconds": NaN}}',
                 "payload.step_seconds", id="nan-in-a-payload"),
    pytest.param(JOBS, '{"job_type": "system.canary", "payload": {"x": [1, -Infinity]}}',
                 "payload.x.1", id="minus-infinity-in-a-list"),
    pytest.param(JOBS, '{"job_type": "system.canary", "payload": {"steps": ' + HUGE + "}}",
                 "payload.steps", id="integer-of-5000-digits"),
    pytest.param(JOBS, '{"job_type": "system.canary", "priority": NaN}', "priority",
                 id="nan-for-an-integer"),
    pytest.param("/api/projects/{pid}/launch", '{"revision_guidance": "x", "y": Infinity}',
                 "y", id="launch"),
    pytest.param(PROJECTS + "/{pid}", '{"settings": {"llm_daily_usd_budget": -1e400}}',
                 "settings.llm_daily_usd_budget", id="patch"),
]


@pytest.mark.parametrize(("url", "raw", "field"), UNSTORABLE_NUMBERS)
def test_a_number_postgresql_cannot_store_is_a_422_naming_where(alice, url, raw, field):
    before = counts()

    r = alice.client.open(url.format(pid=alice.project),
                          method="PATCH" if url.endswith("{pid}") else "POST",
                          data=raw, content_type="application/json", headers=alice.headers())

    error = assert_error(r, 422, "validation_error", field)
    assert field in error["details"]["fields"], error
    assert counts() == before


def test_a_validation_error_lists_every_bad_field(alice):
    r = alice.post(JOBS.format(pid=alice.project),
                   {"job_type": 1, "priority": "x", "extra": True})

    error = assert_error(r, 422, "validation_error")
    assert set(error["details"]["fields"]) == {"job_type", "priority", "extra"}


@pytest.mark.parametrize("url", [PROJECTS, JOBS], ids=["project", "job"])
def test_a_body_over_one_mib_is_refused_before_it_is_read(alice, url):
    before = counts()
    big = json.dumps({"name": "x", "job_type": "system.canary",
                      "goal": "g" * MAX_BODY_BYTES}).encode()
    assert len(big) > MAX_BODY_BYTES

    r = alice.post(url.format(pid=alice.project), raw=big)

    assert_error(r, 413, "payload_too_large", "1 MiB")
    assert r.headers.get("Connection") == "close", "the unread body ends the connection"
    assert counts() == before


def test_content_length_alone_decides_too_large(alice):
    # A client announcing more than 1 MiB is refused on the header, whatever follows.
    before = counts()
    r = alice.post(PROJECTS, raw=b'{"name": "x"}',
                   environ_overrides={"CONTENT_LENGTH": str(MAX_BODY_BYTES + 1)})
    assert_error(r, 413, "payload_too_large")
    assert r.headers.get("Connection") == "close"
    assert counts() == before


def test_only_an_answer_that_leaves_the_body_unread_closes_the_connection(client, alice):
    body = json.dumps({"name": "x" * 100}).encode()
    read = alice.post(PROJECTS, raw=body)
    unread = client.post(PROJECTS, data=body, content_type="application/json",
                         headers={"Authorization": "Bearer not-a-token"})
    no_body = client.get(PROJECTS, headers={"Authorization": "Bearer not-a-token"})
    assert read.status_code == 201 and "Connection" not in read.headers
    assert unread.status_code == 401 and unread.headers.get("Connection") == "close"
    assert no_body.status_code == 401 and "Connection" not in no_body.headers


def test_a_body_of_exactly_one_mib_is_accepted(alice):
    body = {"name": "x", "goal": ""}
    body["goal"] = "g" * (MAX_BODY_BYTES - len(json.dumps(body)))
    raw = json.dumps(body).encode()
    assert len(raw) == MAX_BODY_BYTES
    # goal is capped at 10,000 characters: the size passes, the field does not.
    assert_error(alice.post(PROJECTS, raw=raw), 422, "validation_error", "goal")


# --- auth and ownership -----------------------------------------------------------------------

def _routes(pid: str, jid: str) -> list[tuple[str, str, dict | None]]:
    return [
        ("GET", "/api/projects", None),
        ("POST", "/api/projects", {"name": "p"}),
        ("GET", f"/api/projects/{pid}", None),
        ("GET", f"/api/projects/{pid}/jobs", None),
        ("POST", f"/api/projects/{pid}/jobs", {"job_type": "system.canary"}),
        ("GET", f"/api/projects/{pid}/events", None),
        ("GET", f"/api/jobs/{jid}", None),
        ("POST", f"/api/jobs/{jid}/cancel", None),
        ("POST", f"/api/jobs/{jid}/retry", None),
        ("GET", f"/api/jobs/{jid}/events", None),
        ("GET", f"/api/jobs/{jid}/diagnosis", None),
    ]


@pytest.mark.parametrize("header", [
    pytest.param(None, id="no-header"),
    pytest.param("Bearer", id="bearer-without-token"),
    pytest.param("Bearer   ", id="bearer-blank-token"),
    pytest.param("Basic YWxpY2U6c2VjcmV0", id="other-scheme"),
    pytest.param("Bearer sy_not-a-token-anyone-holds", id="unknown-token"),
    pytest.param("REVOKED", id="revoked-token"),
])
def test_without_a_valid_token_every_api_route_answers_401(client, alice, header):
    jid = alice.job(run_after=FUTURE)
    if header == "REVOKED":
        with session_scope(session_factory()) as s:
            assert revoke_token(s, alice.token[:9]) == 1
        header = f"Bearer {alice.token}"
    before = counts()

    for method, url, body in _routes(alice.project, jid):
        headers = {} if header is None else {"Authorization": header}
        r = client.open(url, method=method, headers=headers,
                        data=None if body is None else json.dumps(body),
                        content_type="application/json")
        assert_error(r, 401, "unauthorized")
        assert r.headers.get("WWW-Authenticate") == "Bearer", (method, url)

    assert counts() == before
    assert client.get("/healthz").status_code == 200, "the probes need no token"


@pytest.mark.parametrize("cache_seconds", [0.0, 0.4])
def test_a_token_revoked_by_another_process_stops_within_the_cache_time(
        monkeypatch, alice, cache_seconds):
    """A web process keeps a live token's caller SWITCHYARD_TOKEN_CACHE_SECONDS; revoked
    elsewhere (the CLI: here a bare UPDATE, which this process's revoke_token never saw), the
    token works at most that long, then is a 401. 0: no keeping, refused at once."""
    monkeypatch.setenv("SWITCHYARD_TOKEN_CACHE_SECONDS", str(cache_seconds))
    get_settings.cache_clear()
    monkeypatch.setattr(auth, "failure_limiter", lambda: RateLimiter(1000.0, 1000.0))
    try:
        url = f"/api/projects/{alice.project}"
        assert alice.get(url).status_code == 200  # looked up, and kept if the cache is on
        pg.execute("UPDATE api_tokens SET revoked_at = now() WHERE prefix = %s",
                   (alice.token[:9],))
        revoked_at = time.monotonic()
        if cache_seconds:
            assert alice.get(url).status_code == 200, "kept for the cache time"
            wait_until(lambda: alice.get(url).status_code == 401, timeout=5,
                       what="the revoked token refused")
            assert time.monotonic() - revoked_at <= cache_seconds + 0.5
        assert_error(alice.get(url), 401, "unauthorized")
    finally:
        get_settings.cache_clear()


def test_a_websocket_is_refused_before_its_upgrade(client, alice, bob):
    url = f"/ws/projects/{alice.project}"
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    assert_error(client.get(url, headers=upgrade), 401, "unauthorized")
    assert_error(bob.get(url, headers=upgrade), 404, "not_found")
    assert_error(alice.get(f"{url}?cursor=x", headers=upgrade), 400, "invalid_cursor", "cursor")


def test_another_owners_project_or_job_is_not_found_never_forbidden(alice, bob):
    jid = alice.job(run_after=FUTURE)
    before = counts()

    for method, url, body in _routes(alice.project, jid)[2:]:
        r = bob.client.open(url, method=method, headers=bob.headers(),
                            data=None if body is None else json.dumps(body),
                            content_type="application/json")
        assert_error(r, 404, "not_found")

    assert counts() == before
    assert [p["id"] for p in bob.get("/api/projects").get_json()["items"]] == [bob.project]
    assert alice.get(f"/api/jobs/{jid}").get_json()["status"] == "queued", "bob changed nothing"


def test_enqueue_into_another_owners_project_is_not_found_whatever_it_holds(
        alice, bob, monkeypatch):
    """The enqueue checks the project's owner in its own INSERT: another owner's project is
    a 404 that writes nothing, even with a key that owner used (never their job back), and a
    job type whose admission reads the project is not admitted against another's project."""
    import dataclasses

    from tasks.engine import registry

    url = JOBS.format(pid=alice.project)
    mine = alice.post(url, {"job_type": "system.canary", "idempotency_key": "k-1",
                            "run_after": FUTURE}).get_json()["job_id"]
    admitted: list[str] = []
    coding = registry.get("code.run_task")
    monkeypatch.setitem(registry._registry, "code.run_task", dataclasses.replace(
        coding, admit=lambda project, _payload: admitted.append(project)))
    before = counts()

    for body in ({"job_type": "system.canary", "idempotency_key": "k-1", "run_after": FUTURE},
                 {"job_type": "system.canary", "run_after": FUTURE},
                 {"job_type": "code.run_task", "payload": {"repo_url": "https://x.test/r.git",
                                                           "task": "fix it"}}):
        r = bob.post(url, body)
        assert_error(r, 404, "not_found")
        assert mine not in r.get_data(as_text=True)
    assert admitted == []
    assert counts() == before
    # Whatever else is wrong with the request, another owner's project is not found.
    for body, code in (({"job_type": "system.canary", "priority": 99}, "validation_error"),
                       ({"job_type": "nope"}, "unknown_job_type"), ({}, "validation_error")):
        assert_error(bob.post(url, body), 404, "not_found")
        assert_error(alice.post(url, body), 422, code)
    assert counts() == before
    # The owner's own retry still answers the first job.
    again = alice.post(url, {"job_type": "system.canary", "idempotency_key": "k-1",
                             "run_after": FUTURE})
    assert again.status_code == 200 and again.get_json()["job_id"] == mine


@pytest.mark.parametrize("ident", [str(uuid.uuid4()), "not-a-uuid", "0"])
def test_an_unknown_or_malformed_id_is_not_found(alice, ident):
    assert_error(alice.get(f"/api/projects/{ident}"), 404, "not_found")
    assert_error(alice.get(f"/api/jobs/{ident}"), 404, "not_found")
    before = counts()
    assert_error(alice.post(f"/api/projects/{ident}/jobs", {"job_type": "system.canary"}),
                 404, "not_found")
    assert_error(alice.post(f"/api/jobs/{ident}/cancel"), 404, "not_found")
    assert counts() == before


def test_an_unknown_route_answers_the_error_body(alice):
    assert_error(alice.get("/api/nothing-here"), 404, "not_found")
    assert_error(alice.client.delete(f"/api/projects/{alice.project}",
                                     headers=alice.headers()), 405, "method_not_allowed")


# --- projects and jobs ------------------------------------------------------------------------

def test_a_project_is_created_and_read_back(alice):
    r = alice.post(PROJECTS, {"name": "Launch", "goal": "ship", "night_shift": True})
    assert r.status_code == 201
    created = r.get_json()
    # The contract's fields (it may be extended, never reduced)
    assert set(created) >= {"id", "name", "goal", "night_shift", "phase", "created_at"}
    assert (created["name"], created["goal"], created["night_shift"]) == ("Launch", "ship", True)
    assert alice.get(f"/api/projects/{created['id']}").get_json() == created
    listed = [p["id"] for p in alice.get(PROJECTS).get_json()["items"]]
    assert sorted(listed) == sorted([alice.project, created["id"]])


def test_a_job_is_accepted_with_its_urls_and_read_back(alice):
    r = alice.post(JOBS.format(pid=alice.project),
                   {"job_type": "system.canary", "payload": {"steps": 2}, "priority": 7,
                    "max_attempts": 2, "run_after": FUTURE})
    assert r.status_code == 202
    body = r.get_json()
    jid = body["job_id"]
    assert body == {"job_id": jid, "status": "queued", "created": True,
                    "status_url": f"/api/jobs/{jid}", "events_url": f"/api/jobs/{jid}/events"}

    job = alice.get(body["status_url"]).get_json()
    assert {k: job[k] for k in ("id", "project_id", "job_type", "status", "attempts",
                                "max_attempts", "priority", "payload", "result", "steps")} == {
        "id": jid, "project_id": alice.project, "job_type": "system.canary",
        "status": "queued", "attempts": 0, "max_attempts": 2, "priority": 7,
        "payload": {"steps": 2, "step_seconds": 0.0, "fail_first_attempts": 0,
                    "sleep_seconds": 0.0, "children": 0},
        "result": None, "steps": []}
    for key in ("last_error", "created_at", "started_at", "completed_at", "parent_job_id"):
        assert key in job


def test_the_same_idempotency_key_answers_the_first_job(alice):
    url = JOBS.format(pid=alice.project)
    first = alice.post(url, {"job_type": "system.canary", "idempotency_key": "order-42",
                             "run_after": FUTURE})
    assert first.status_code == 202 and first.get_json()["created"] is True
    before = counts()

    # The same key again, even with another payload, is the first job: 200, created=false.
    again = alice.post(url, {"job_type": "system.canary", "idempotency_key": "order-42",
                             "payload": {"steps": 9}, "run_after": FUTURE})

    assert again.status_code == 200
    assert again.get_json()["job_id"] == first.get_json()["job_id"]
    assert again.get_json()["created"] is False
    assert counts() == before
    assert alice.get(f"/api/jobs/{first.get_json()['job_id']}").get_json()["payload"]["steps"] == 3


def test_without_a_key_each_request_is_a_new_job(alice):
    ids = {alice.job(run_after=FUTURE) for _ in range(3)}
    assert len(ids) == 3


def test_an_idempotency_key_is_scoped_to_its_project(alice, bob):
    a = alice.job(idempotency_key="same", run_after=FUTURE)
    b = bob.job(idempotency_key="same", run_after=FUTURE)
    assert a != b


def test_list_pages_cover_every_job_once_newest_first_with_filters(alice):
    # Given 7 canaries and 3 sleepers, two canaries canceled
    canaries = [alice.job(run_after=FUTURE) for _ in range(7)]
    sleepers = [alice.job(job_type="test.sleeper", run_after=FUTURE) for _ in range(3)]
    for jid in canaries[:2]:
        assert alice.post(f"/api/jobs/{jid}/cancel").status_code == 200
    url = JOBS.format(pid=alice.project)

    def walk(query: str, limit: int, during=None) -> list[list[str]]:
        pages, cursor = [], None
        while True:
            q = f"{url}?limit={limit}{query}" + (f"&before={cursor}" if cursor else "")
            r = alice.get(q)
            assert r.status_code == 200, r.get_json()
            body = r.get_json()
            assert set(body) == {"items", "next"}
            pages.append([j["id"] for j in body["items"]])
            if during and len(pages) == 1:
                during()
            cursor = body["next"]
            if cursor is None:
                return pages

    # When they are listed 3 at a time (a new job arriving after the first page)
    late: list[str] = []
    pages = walk("", 3, during=lambda: late.append(alice.job(run_after=FUTURE)))

    # Then every job appears exactly once, newest first, and the late one on no page
    everything = flat(pages)
    assert [len(p) for p in pages] == [3, 3, 3, 1]
    assert sorted(everything) == sorted(canaries + sleepers)
    assert everything == list(reversed(canaries + sleepers))
    assert late[0] not in everything

    # And filters combine with paging
    assert sorted(flat(walk("&job_type=test.sleeper", 2))) == sorted(sleepers)
    assert sorted(flat(walk("&status=canceled", 1))) == sorted(canaries[:2])
    queued_canaries = flat(walk("&status=queued&job_type=system.canary", 4))
    assert sorted(queued_canaries) == sorted([*canaries[2:], late[0]])
    assert alice.get(f"{url}?job_type=no.such").get_json() == {"items": [], "next": None}
    assert alice.get(f"{url}?limit=200").get_json()["next"] is None


@pytest.mark.parametrize(("query", "status", "code", "field"), [
    ("status=sleeping", 422, "validation_error", "status"),
    ("limit=0", 422, "validation_error", "limit"),
    ("limit=201", 422, "validation_error", "limit"),
    ("limit=ten", 422, "validation_error", "limit"),
    ("before=not-a-cursor", 400, "invalid_cursor", "before"),
    ("before=bm90fGF8Y3Vyc29y", 400, "invalid_cursor", "before"),  # base64 of garbage
])
def test_a_bad_list_query_is_refused(alice, query, status, code, field):
    error = assert_error(alice.get(f"{JOBS.format(pid=alice.project)}?{query}"), status, code,
                         field)
    if field == "limit":  # a parameter of the URL, not of a body the request has none of
        assert error["message"].startswith("invalid query string: limit"), error


@pytest.mark.parametrize("query", ["cursor=abc", "cursor=-1"])
def test_a_bad_event_cursor_is_refused(alice, query):
    jid = alice.job(run_after=FUTURE)
    for url in (f"/api/projects/{alice.project}/events", f"/api/jobs/{jid}/events"):
        assert_error(alice.get(f"{url}?{query}"), 400, "invalid_cursor", "cursor")


# --- cancel and retry -------------------------------------------------------------------------

def test_cancel_of_a_queued_job_is_immediate_and_idempotent(alice):
    jid = alice.job(run_after=FUTURE)

    r = alice.post(f"/api/jobs/{jid}/cancel")

    assert r.status_code == 200
    body = r.get_json()
    assert (body["id"], body["status"]) == (jid, "canceled")
    assert body["completed_at"] is not None and "steps" in body
    before = counts()
    again = alice.post(f"/api/jobs/{jid}/cancel")
    assert again.status_code == 200 and again.get_json()["status"] == "canceled"
    assert counts() == before, "a second cancel writes no second event"
    assert status_history(jid) == ["queued", "canceled"]


def test_retry_is_refused_unless_the_job_failed(alice):
    queued = alice.job(run_after=FUTURE)
    canceled = alice.job(run_after=FUTURE)
    alice.post(f"/api/jobs/{canceled}/cancel")
    before = counts()

    for jid, state in ((queued, "queued"), (canceled, "canceled")):
        error = assert_error(alice.post(f"/api/jobs/{jid}/retry"), 409, "conflict", state)
        assert error["details"] == {"status": state}

    assert counts() == before


def test_a_running_job_is_asked_to_stop_and_a_failed_one_can_be_retried(worker, alice):
    # Given a slow canary that is running
    running = alice.job(payload={"steps": 50, "step_seconds": 0.1})
    wait_until(lambda: alice.get(f"/api/jobs/{running}").get_json()["steps"],
               what="the canary's first step")

    # When it is canceled, the answer is the job as it is now: still running
    r = alice.post(f"/api/jobs/{running}/cancel")
    assert r.status_code == 200 and r.get_json()["status"] == "running"
    # and it stops at its next step boundary
    wait_until(lambda: alice.get(f"/api/jobs/{running}").get_json()["status"] == "canceled",
               what="the canary to be canceled")
    assert len(alice.get(f"/api/jobs/{running}").get_json()["steps"]) < 50

    # Given a job that fails permanently
    doomed = alice.job(job_type="test.doomed", max_attempts=1)
    wait_until(lambda: alice.get(f"/api/jobs/{doomed}").get_json()["status"] == "failed",
               what="the doomed job to fail")

    # When it is retried: 202, queued again, and it runs (and fails) once more
    r = alice.post(f"/api/jobs/{doomed}/retry")
    assert r.status_code == 202
    assert r.get_json()["status"] in {"queued", "running", "failed"}
    wait_until(lambda: status_history(doomed).count("failed") == 2, what="the second failure")
    assert status_history(doomed) == ["queued", "running", "failed",
                                      "queued", "running", "failed"]


# --- rate limit -------------------------------------------------------------------------------

def test_a_token_over_its_rate_limit_gets_429_with_retry_after(monkeypatch, alice, bob):
    # A bucket of 3 refilled at one request every 4 seconds: the 4th request is refused.
    tight = RateLimiter(rate=0.25, burst=3)
    monkeypatch.setattr(auth, "limiter", lambda: tight)
    for _ in range(3):
        assert alice.get(PROJECTS).status_code == 200
    before = counts()

    refused = alice.post(PROJECTS, {"name": "one too many"})

    error = assert_error(refused, 429, "rate_limited")
    assert 3 < error["details"]["retry_after_seconds"] <= 4
    assert refused.headers["Retry-After"] == "4"
    assert counts() == before, "a refused request writes nothing"
    assert bob.get(PROJECTS).status_code == 200, "the limit is per token"
    # A bad token is refused as unauthorized before it can spend anyone's bucket.
    assert_error(alice.client.get(PROJECTS, headers={"Authorization": "Bearer nope"}),
                 401, "unauthorized")


def test_failed_authentications_are_limited_per_client_address(monkeypatch, client, alice,
                                                                bob):
    # Three failures per address, then one every 10 s.
    tight = RateLimiter(rate=0.1, burst=3)
    monkeypatch.setattr(auth, "failure_limiter", lambda: tight)
    attacker, elsewhere = {"REMOTE_ADDR": "203.0.113.7"}, {"REMOTE_ADDR": "198.51.100.2"}
    assert alice.get(PROJECTS, environ_overrides=attacker).status_code == 200  # at work there
    carol = _caller(client, "carol")  # a token this process has not seen yet

    # Given three wrong tokens from one address
    for n in range(3):
        assert_error(client.get(PROJECTS, headers={"Authorization": f"Bearer guess-{n}"},
                                environ_overrides=attacker), 401, "unauthorized")
    # When it tries again, over the API or the sign-in form
    refused = client.get(PROJECTS, headers={"Authorization": "Bearer guess-3"},
                         environ_overrides=attacker)
    form = client.get("/", environ_overrides=attacker).get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf, form
    page = client.post("/signin", data={"csrf": csrf.group(1), "token": "guess-4"},
                       environ_overrides=attacker)

    # Then it is told to wait, in the contract's error format
    error = assert_error(refused, 429, "auth_rate_limited")
    assert 9 < error["details"]["retry_after_seconds"] <= 10
    assert refused.headers["Retry-After"] == "10"
    assert page.status_code == 429 and page.headers["Retry-After"] == "10"
    # and valid tokens are not slowed: one already at work at this address, one this
    # process has never seen at this same address (someone else's failures must not lock a
    # person out: a NAT, an office, a proxy), any elsewhere
    assert alice.get(PROJECTS, environ_overrides=attacker).status_code == 200
    assert carol.get(PROJECTS, environ_overrides=attacker).status_code == 200
    assert bob.get(PROJECTS, environ_overrides=elsewhere).status_code == 200
    # while another address's failures are its own
    assert_error(client.get(PROJECTS, headers={"Authorization": "Bearer guess-5"},
                            environ_overrides=elsewhere), 401, "unauthorized")


def test_failures_from_one_ipv6_64_count_together(monkeypatch, client) -> None:
    """One host holds a whole /64: an address per guess must not mean a fresh bucket."""
    tight = RateLimiter(rate=0.1, burst=3)
    monkeypatch.setattr(auth, "failure_limiter", lambda: tight)
    for n in range(3):
        assert_error(client.get(PROJECTS, headers={"Authorization": f"Bearer guess-{n}"},
                                environ_overrides={"REMOTE_ADDR": f"2001:db8:1:2::{n + 1}"}),
                     401, "unauthorized")
    refused = client.get(PROJECTS, headers={"Authorization": "Bearer guess-3"},
                         environ_overrides={"REMOTE_ADDR": "2001:db8:1:2:ffff::9"})
    assert_error(refused, 429, "auth_rate_limited")
    other_net = client.get(PROJECTS, headers={"Authorization": "Bearer guess-4"},
                           environ_overrides={"REMOTE_ADDR": "2001:db8:1:3::1"})
    assert_error(other_net, 401, "unauthorized")


def test_behind_trusted_proxies_the_forwarded_client_is_limited(monkeypatch) -> None:
    """Behind a proxy every peer address is the proxy's: with SWITCHYARD_TRUSTED_PROXIES the
    client the proxy names is limited, and one guesser does not lock everyone out."""
    monkeypatch.setenv("SWITCHYARD_TRUSTED_PROXIES", "1")
    get_settings.cache_clear()
    try:
        proxied = create_app().test_client()
        tight = RateLimiter(rate=0.1, burst=2)
        monkeypatch.setattr(auth, "failure_limiter", lambda: tight)
        proxy = {"REMOTE_ADDR": "10.0.0.5"}
        for n in range(2):
            proxied.get(PROJECTS, headers={"Authorization": f"Bearer guess-{n}",
                                           "X-Forwarded-For": "203.0.113.7"},
                        environ_overrides=proxy)
        guesser = proxied.get(PROJECTS, headers={"Authorization": "Bearer guess-2",
                                                 "X-Forwarded-For": "203.0.113.7"},
                              environ_overrides=proxy)
        someone = proxied.get(PROJECTS, headers={"Authorization": "Bearer typo",
                                                 "X-Forwarded-For": "198.51.100.9"},
                              environ_overrides=proxy)
        assert_error(guesser, 429, "auth_rate_limited")
        assert_error(someone, 401, "unauthorized")
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


@pytest.mark.parametrize("name", ["SWITCHYARD_SECRET_KEY", "SWITCHYARD_METRICS_TOKEN"])
def test_a_short_secret_setting_is_refused_at_start(monkeypatch, name) -> None:
    monkeypatch.setenv(name, "too-short")
    get_settings.cache_clear()
    try:
        with pytest.raises(SettingsError, match=f"{name} must be at least 32"):
            get_settings()
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
