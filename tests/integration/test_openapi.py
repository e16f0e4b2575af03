"""The OpenAPI document is the truth: schemathesis fuzzes every operation of the live app.

Each operation gets positive and negative generated requests, authenticated as a real owner
with a real project and jobs; a 5xx, an undocumented status, a wrong content type or a body
that breaks its schema fails. The streams never end, so they are checked by hand instead.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

from app.api.openapi import build_document
from app.http.auth import PUBLIC_PATHS, is_public, limiter
from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.services import keystore
from tasks.settings import get_settings

STREAMS = ("/api/projects/{pid}/events", "/api/jobs/{jid}/events")
MAX_EXAMPLES = 25


@dataclass(frozen=True)
class World:
    token: str
    project: str
    jobs: tuple[str, ...]  # queued, failed, completed with a step
    foreign_project: str  # another owner's: must answer 404
    foreign_job: str
    approvals: tuple[str, str]  # the owner's pending one, a stranger's
    effects: tuple[str, str]  # the owner's unknown one, a stranger's
    artifacts: tuple[str, str]  # the owner's (an HTML page: an attachment), a stranger's
    turns: Iterator[int] = field(default_factory=itertools.count)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


# The document is loaded once, in-process: /api/openapi.json is public and touches no database.
# Every request carries the real token (ignored_auth probes without it), so generating the
# Authorization header is pointless.
GENERATION = {"max-examples": MAX_EXAMPLES, "deterministic": True, "mode": "all",
              "database": "none", "with-security-parameters": False}
OPERATIONS = [{
    # The `before` cursor is opaque: a well-formed string that is no cursor is a 400.
    "include-operation-id": "list_jobs",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "400", "401", "404", "429"]}},
}, {
    "include-operation-id": "list_chat",  # its `before` is opaque too
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "400", "401", "404", "429"]}},
}, {
    # A workflow's rules (no cycle, known public job types, templates reading upstream steps,
    # conditions that parse) are not JSON Schema: a schema-valid spec may still be a 422.
    "include-operation-id": "save_workflow",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "422", "429"]}},
}, {
    # A plan's tasks obey DAG rules (unique ids, known dependencies, no cycle) that are not
    # JSON Schema, and only a plan awaiting approval may be edited (409 otherwise).
    "include-operation-id": "edit_plan",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "409", "422", "429"]}},
}, {
    # A function's code must parse as JavaScript, which JSON Schema cannot say: a
    # schema-valid body may still be a 422 (invalid_function, with line and column).
    "include-operation-id": "save_function",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "422", "429"]}},
}, {
    # A task that asks for a pull request needs the project's own GitHub token (issue 23):
    # a project the sequence created has none, so a schema-valid body may be a 422.
    "include-operation-id": "create_code_task",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "422", "429"]}},
}, {
    # A rerun names a step the job recorded (422 unknown_step otherwise) of a finished job
    # (409 otherwise): neither is JSON Schema.
    "include-operation-id": "rerun_job",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "409", "422", "429"]}},
}, {
    # The same through the generic enqueue: a `code.run_task` payload naming a `github_repo`
    # is a 422 invalid_payload without the project's token (the stateful chains found one
    # once the document grew; the per-call run had not drawn it).
    "include-operation-id": "create_job",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "409", "422", "429"]}},
}, {
    # A run names the version to run; a version that does not exist is a 404 by design, so
    # a generated `version` after a fresh save is no created resource gone missing (ST302).
    "include-operation-id": "run_function",
    "checks": {"ensure_resource_availability": {"enabled": False}},
}, {
    # An owner keeps at most SWITCHYARD_MAX_PROJECTS_PER_OWNER projects (issue 23): a long
    # sequence of schema-valid creations meets the quota, a 422 quota_exceeded by design.
    "include-operation-id": "create_project",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "422", "429"]}},
}, {
    # A role's provider in `llm_models` must be one the operator has set up (its key is the
    # operator's, issue 27): the document lists every provider, this server may have one.
    "include-operation-id": "update_project",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "401", "404", "422", "429"]}},
}, {
    # Unknown query parameters are ignored, as HTTP servers do; bodies refuse extra keys.
    "include-method": "GET",
    "generation": {**GENERATION, "allow-extra-parameters": False},
}]
CONFIG = schemathesis.Config.from_dict({
    "generation": GENERATION, "phases": {"stateful": {"enabled": False}},
    "operations": OPERATIONS})
APP = create_app()
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", APP, config=CONFIG).exclude(
    operation_id=["project_events", "job_events"])  # streams never end; checked by hand below


@pytest.fixture(scope="module")
def app():
    return APP


@pytest.fixture(scope="module")
def api() -> schemathesis.BaseSchema:
    return schema


def _job(project: str, status: str = "queued") -> str:
    job_id = str(enqueue(EnqueueRequest(project_id=project, job_type="system.canary"),
                         publish=False).job_id)
    if status != "queued":
        pg.execute("UPDATE agent_jobs SET status = %s, attempts = 1, started_at = now(), "
                   "completed_at = now(), last_error = CASE WHEN %s = 'failed' THEN 'boom' END "
                   "WHERE id = %s", (status, status, job_id))
        pg.execute("INSERT INTO job_steps (job_id, seq, name, status, output, finished_at) "
                   "VALUES (%s, 1, 'step-1', 'completed', '{\"n\": 1}', now())", (job_id,))
        pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
                   "VALUES (%s, %s, 'status', %s, jsonb_build_object('status', %s::text))",
                   (job_id, project, status, status))
    return job_id


def _effect(project: str) -> str:
    effect_id = str(uuid.uuid4())
    pg.execute("INSERT INTO action_executions (id, idempotency_key, project_id, action_type, args, "
               "status) VALUES (%s, %s, %s, 'deploy_hook', '{}', 'unknown')",
               (effect_id, f"k:{effect_id}", project))
    return effect_id


def _artifact(project: str, job_id: str) -> str:
    from tasks.services.artifact_store import storage_key, store

    data = f"<h1>{project}</h1>".encode()
    key = storage_key(project, hashlib.sha256(data).hexdigest())
    store().put(key, data, "text/html")
    artifact_id = str(uuid.uuid4())
    pg.execute("INSERT INTO artifacts (id, project_id, job_id, step_seq, step_name, kind, name, "
               "content_type, size, sha256, storage_key) VALUES (%s, %s, %s, 1, 'artifact:p.html', "
               "'page', 'p.html', 'text/html', %s, %s, %s)",
               (artifact_id, project, job_id, len(data), key.rsplit("/", 1)[1], key))
    return artifact_id


def _approval(project: str) -> str:
    approval_id = str(uuid.uuid4())
    pg.execute("INSERT INTO approvals (id, project_id, action_type, title, action_args, args_hash) "
               "VALUES (%s, %s, 'email.send', 'Send the launch email', '{}', 'h')",
               (approval_id, project))
    return approval_id


@pytest.fixture
def world(owner_and_project: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    owner, project = owner_and_project
    # The coverage phase sends hundreds of requests per operation; a 429 would cut it short.
    monkeypatch.setenv("SWITCHYARD_RATE_LIMIT_BURST", "100000")
    get_settings.cache_clear()
    limiter.cache_clear()
    with session_scope(session_factory()) as session:
        _, token = create_token(session, f"owner-{owner[:8]}")
        create_token(session, "stranger")
    # A code task asking for a pull request needs the project's own GitHub token.
    keystore.put(project, "github_token", "ghp-openapi-0123456789")
    foreign = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) "
               "SELECT %s, id, 'theirs' FROM owners WHERE name = 'stranger'", (foreign,))
    jobs = (_job(project), _job(project, "failed"), _job(project, "completed"))
    approvals = (_approval(project), _approval(foreign))
    effects = (_effect(project), _effect(foreign))
    foreign_job = _job(foreign)
    artifacts = (_artifact(project, jobs[2]), _artifact(foreign, foreign_job))
    yield World(token, project, jobs, foreign, foreign_job, approvals, effects, artifacts)
    monkeypatch.undo()
    get_settings.cache_clear()
    limiter.cache_clear()


def _ids(world: World, name: str) -> list[str]:
    """The owner's ids of a kind, then a stranger's."""
    if name == "pid":
        return [world.project, world.foreign_project]
    if name == "aid":
        return list(world.approvals)
    if name == "eid":
        return list(world.effects)
    if name == "artid":
        return list(world.artifacts)
    return [*world.jobs, world.foreign_job]


def _aim_at_real_ids(case: schemathesis.Case, world: World) -> None:
    """Generated ids hit nothing, so cases take turns: the owner's ids, a stranger's, generated."""
    if not case.path_parameters or (
            case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH)):
        return
    turn = next(world.turns)
    for name in case.path_parameters:
        if name == "name":  # a secret's name, not an id: the generated one is fine
            continue
        own, foreign = _ids(world, name)[:-1], _ids(world, name)[-1]
        choices = [*own, *own, foreign, None]  # None: keep the generated id
        if (pick := choices[turn % len(choices)]) is not None:
            case.path_parameters[name] = pick


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one world per operation
def test_operation_conforms_to_the_document(case: schemathesis.Case, world: World) -> None:
    _aim_at_real_ids(case, world)
    response = case.call_and_validate(headers=world.auth)
    foreign = {world.foreign_project, world.foreign_job, world.approvals[1], world.effects[1],
               world.artifacts[1]}
    if case.method == case.operation.method.upper() and (
            foreign & {str(v) for v in case.path_parameters.values()}):
        assert response.status_code in (401, 404, 429), "another owner's data answered"


def test_the_document_is_valid_openapi_3_1(app) -> None:
    doc = app.test_client().get("/api/openapi.json").get_json()
    assert doc["openapi"] == "3.1.0"
    errors = [e.message for e in OPENAPI_31_VALIDATOR.iter_errors(doc)]
    assert not errors, errors
    for name, schema in doc["components"]["schemas"].items():
        assert jsonschema_rs.meta.is_valid(schema), f"components.schemas.{name}"
    # pydantic emits its own names for bounds it cannot translate; JSON Schema ignores them.
    assert not re.search(r'"(ge|le|gt|lt)":', json.dumps(doc)), "an untranslated bound"
    for path, item in doc["paths"].items():
        for method, op in item.items():
            assert op["responses"], f"{method} {path} documents no response"
            for code, response in op["responses"].items():
                assert code.isdigit(), f"{method} {path}: {code} is not an exact status"
                if int(code) >= 400:
                    assert response["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/Error"}, f"{method} {path} {code}"
            bearer = any("bearer" in requirement for requirement in op["security"])
            assert bearer != is_public(path), f"{method} {path}"
            assert ("401" in op["responses"]) == bool(op["security"]), f"{method} {path}"


def test_every_route_is_documented_and_every_documented_route_exists(app) -> None:
    documented = {(m.upper(), p) for p, item in build_document()["paths"].items() for m in item}
    served = set()
    for rule in app.url_map.iter_rules():  # the API and the probes; not the web UI's pages
        if not rule.rule.startswith("/api/") and rule.rule not in PUBLIC_PATHS:
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        served |= {(m, path) for m in rule.methods - {"HEAD", "OPTIONS"}}
    assert documented == served


def test_job_create_has_one_variant_per_registered_job_type() -> None:
    from tasks.engine import registry

    schemas = build_document()["components"]["schemas"]
    mapping = schemas["JobCreate"]["discriminator"]["mapping"]
    assert sorted(mapping) == registry.public_names()
    assert schemas["JobCreate.system.canary"]["properties"]["payload"] == {
        "$ref": "#/components/schemas/Payload.system.canary"}


@pytest.mark.parametrize("path", STREAMS)
def test_streams_are_documented_and_refuse_bad_requests(api, world: World, path: str) -> None:
    operation = api[path]["GET"]
    ok = build_document()["paths"][path]["get"]["responses"]["200"]
    assert list(ok["content"]) == ["text/event-stream"]
    name = operation.path_parameters[0].name
    real, foreign = _ids(world, name)[0], _ids(world, name)[-1]
    cases = [({name: str(uuid.uuid4())}, {}, 404), ({name: foreign}, {}, 404),
             ({name: real}, {"cursor": "-1"}, 400), ({name: real}, {"cursor": "x"}, 400),
             ({name: real}, {"tail": "-1"}, 400), ({name: real}, {"tail": "1001"}, 400),
             ({name: real}, {"tail": "5", "cursor": "1"}, 400)]
    for params, query, status in cases:
        case = operation.Case(path_parameters=params, query=query)
        response = case.call(headers=world.auth)
        assert response.status_code == status, (params, query, response.text)
        case.validate_response(response, headers=world.auth)


def test_a_finished_jobs_stream_ends_after_its_terminal_event(api, world: World) -> None:
    completed = world.jobs[2]
    case = api["/api/jobs/{jid}/events"]["GET"].Case(path_parameters={"jid": completed})
    response = case.call(headers=world.auth)
    assert response.status_code == 200
    assert response.headers["content-type"][0].startswith("text/event-stream")
    assert "event: status" in response.text and '"status": "completed"' in response.text
    case.validate_response(response, headers=world.auth)


# What fuzzing found, pinned so that a new seed or schema cannot lose it: (reason, request, status).
FOUND = [
    ("NUL in a text column was a 500 at the insert", "POST", "/api/projects",
     {"name": "a\u0000b"}, 422),
    ("NUL inside a payload string: jsonb refuses it", "POST", "{jobs}",
     {"job_type": "system.canary", "payload": {"x": ["\u0000"]}}, 422),
    ("NUL in a filter reached PostgreSQL", "GET", "{jobs}?job_type=a%00b", None, 422),
    ("the same filter across projects", "GET", "/api/jobs?job_type=a%00b", None, 422),
    ("JSON Schema's integer includes 2.0", "POST", "{jobs}",
     {"job_type": "system.canary", "priority": 2.0}, 202),
    ("2.5 is no integer", "POST", "{jobs}", {"job_type": "system.canary", "priority": 2.5}, 422),
    ("a payload's wrong type was coerced (false -> 0.0)", "POST", "{jobs}",
     {"job_type": "system.canary", "payload": {"step_seconds": False}}, 422),
    ("nor is a numeric string a number", "POST", "{jobs}",
     {"job_type": "system.canary", "payload": {"steps": "3"}}, 422),
    ("a year-0 instant was stored, then every read of it failed", "POST", "{jobs}",
     {"job_type": "system.canary", "run_after": "0001-01-01T00:00:00+01:00"}, 422),
    ("a year-10000 instant likewise", "POST", "{jobs}",
     {"job_type": "system.canary", "run_after": "9999-12-31T23:59:59-23:59"}, 422),
    ("NUL in a settings key: jsonb refuses it", "POST", "/api/projects",
     {"name": "p", "settings": {"permissions": {"a\u0000": True}}}, 422),
    ("NUL in a chat message", "POST", "{project}/chat", {"message": "a\u0000"}, 422),
    ("NUL in a memory filter", "GET", "{project}/memory?category=a%00b", None, 422),
    ("a decision's version 1.0 is the integer 1", "POST", "{approval}/decision",
     {"decision": "approved", "version": 1.0}, 200),
]


@pytest.mark.parametrize(("reason", "method", "url", "body", "status"), FOUND,
                         ids=[row[0] for row in FOUND])
def test_what_fuzzing_found_stays_fixed(app, world: World, reason: str, method: str, url: str,
                                        body: dict | None, status: int) -> None:
    client = app.test_client()
    url = (url.replace("{jobs}", f"/api/projects/{world.project}/jobs")
           .replace("{project}", f"/api/projects/{world.project}")
           .replace("{approval}", f"/api/inbox/{world.approvals[0]}"))
    response = client.open(url, method=method, json=body, headers=world.auth)
    assert response.status_code == status, response.get_json()
    if status >= 400:
        assert set(response.get_json()["error"]) == {"code", "message", "details"}
    listing = client.get(f"/api/projects/{world.project}/jobs", headers=world.auth)
    assert listing.status_code == 200  # nothing stored that a read cannot load


def test_an_unsupported_method_says_which_are_allowed(app, world: World) -> None:
    client = app.test_client()
    response = client.delete(f"/api/projects/{world.project}", headers=world.auth)
    assert response.status_code == 405
    assert set(response.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS", "PATCH"}
    assert response.get_json()["error"]["code"] == "method_not_allowed"
    options = client.options("/api/jobs/retry", headers=world.auth)
    assert "GET" not in options.headers["Allow"]  # "retry" is no job id


def test_not_ready_answers_503_with_the_error_shape(app, monkeypatch) -> None:
    from app.routes import health

    class NoBroker:
        def connection_for_write(self):
            raise ConnectionError("broker down")

    monkeypatch.setattr(health, "celery_app", NoBroker())
    monkeypatch.setattr(health, "BROKER_TTL", 0.0)  # no answer kept from an earlier probe
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    error = response.get_json()["error"]
    assert error["code"] == "not_ready"
    assert error["details"]["checks"] == {"database": "ok", "migrations": "ok",
                                          "broker": "error: ConnectionError"}
    assert error["message"] == "not ready (broker: error: ConnectionError)"


def test_a_migrations_check_that_cannot_be_made_is_not_ready(app, monkeypatch) -> None:
    from app.routes import health

    def unreadable(version: str | None) -> str | None:
        raise FileNotFoundError("alembic/versions")
    monkeypatch.setattr(health, "schema_problem", unreadable)
    response = app.test_client().get("/readyz")
    assert response.status_code == 503, response.get_json()
    checks = response.get_json()["error"]["details"]["checks"]
    assert checks["database"] == "ok" and checks["migrations"] == "error: FileNotFoundError"


def test_sequences_of_calls_never_answer_5xx(world: World) -> None:
    """Stateful: chains of calls along the links schemathesis finds between operations (an
    id a response gives, another operation's path parameter) — create a project, enqueue
    into it, read, cancel, retry, set secrets … — validated like single calls."""
    # Auth is probed per operation by the test above; here every call carries the token.
    config = schemathesis.Config.from_dict({"generation": GENERATION, "operations": OPERATIONS,
                                            "checks": {"ignored_auth": {"enabled": False}}})
    # jobs:batch is fuzzed call by call above; in a chain, its items' answers depend on what
    # earlier examples stored (a key seen before answers 200 in its item), so hypothesis's
    # replay of a sequence drew differently from the sequence itself (FlakyStrategyDefinition
    # in CI).
    machine = schemathesis.openapi.from_wsgi("/api/openapi.json", APP, config=config).exclude(
        operation_id=["project_events", "job_events", "create_jobs"]).as_state_machine()
    assert len(machine.bundles) >= 4, "too few links between operations were found"

    class Workflow(machine):  # type: ignore[valid-type,misc]
        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, object]:
            return {"headers": world.auth}

    Workflow.run(settings=settings(max_examples=40, stateful_step_count=6, deadline=None,
                                   suppress_health_check=list(HealthCheck)))


def test_a_payloads_inner_models_refuse_nul_as_the_api_does() -> None:
    # A nested model of a payload (here test.artifact_writer's files) is a component of its
    # own: it carries the NUL rule too, or a fuzzer's schema-valid request gets a 422.
    inner = build_document()["components"]["schemas"]["ArtifactFile"]
    assert inner["properties"]["name"]["pattern"] == r"^[^\x00]*$"
    assert inner["propertyNames"] == {"pattern": r"^[^\x00]*$"}


def test_readiness_probes_are_throttled_per_address_and_the_broker_asked_sparingly(
        app, monkeypatch) -> None:
    from app.routes import health

    real, asked = health.celery_app, []

    class CountingBroker:
        def connection_for_write(self):
            asked.append(1)
            return real.connection_for_write()

    monkeypatch.setattr(health, "celery_app", CountingBroker())
    monkeypatch.setattr(health, "_broker", (-10.0, ""))  # nothing kept from an earlier probe
    health.probe_limiter.cache_clear()
    try:
        client = app.test_client()
        answers = [client.get("/readyz", environ_base={"REMOTE_ADDR": "203.0.113.9"}).status_code
                   for _ in range(40)]
        # A burst of probes from one address: the first are answered, the rest are 429s
        burst = int(health.PROBE_BURST)
        assert answers[:burst] == [200] * burst, answers
        assert 429 in answers[burst:]
        # Another address is not held back by it, and the broker was asked once for them all
        other = client.get("/readyz", environ_base={"REMOTE_ADDR": "203.0.113.10"})
        assert other.status_code == 200
        assert len(asked) == 1
    finally:
        health.probe_limiter.cache_clear()
