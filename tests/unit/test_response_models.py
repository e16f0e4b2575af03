"""Response bodies have one home (app.api.responses): every documented JSON answer is a component
generated from a model, and what each serializer builds validates against the document."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import jsonschema_rs
import pytest
from pydantic import ValidationError

from app.api import responses
from app.api.openapi import ANSWERS, _model_schema, build_document
from app.api.packets import Usage, packet_json, usage_json
from app.api.queries import job_json, project_json
from app.http.errors import _body
from app.routes.effects import effect_json
from app.routes.startup import approval_json
from app.streams.hub import Event
from models import AgentJob, Project
from models.startup import Approval
from tasks.services.effects.records import EffectRecord

NOW = datetime(2025, 5, 1, 12, 30, tzinfo=UTC)
DOC = build_document()
COMPONENTS = DOC["components"]["schemas"]
# Documented 2xx JSON bodies that no model describes, and why.
NOT_MODELS = {
    ("get", "/api/openapi.json"): "the document itself: any object",
}


def _documented_bodies() -> list[tuple[str, str, str, dict[str, Any]]]:
    out = []
    for path, item in DOC["paths"].items():
        for method, op in item.items():
            for code, response in op["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if code.startswith("2") and schema is not None:
                    out.append((method, path, code, schema))
    return out


def test_every_documented_json_answer_is_a_component_generated_from_its_model() -> None:
    for method, path, code, schema in _documented_bodies():
        if (method, path) in NOT_MODELS:
            continue
        assert set(schema) == {"$ref"}, f"{method} {path} {code}: written by hand"
        name = schema["$ref"].rsplit("/", 1)[1]
        assert name in ANSWERS, f"{method} {path} {code}: {name} has no model"
        scratch: dict[str, Any] = {}
        assert COMPONENTS[name] == _model_schema(ANSWERS[name], scratch)
        for nested, nested_schema in scratch.items():  # and so is everything it refers to
            assert COMPONENTS[nested] == nested_schema, f"{name} -> {nested}"


def test_error_answers_are_the_error_model() -> None:
    scratch: dict[str, Any] = {}
    assert COMPONENTS["Error"] == _model_schema(responses.Error, scratch)
    assert COMPONENTS["ErrorDetail"]["additionalProperties"] is False


def _validates(component: str, body: dict[str, Any]) -> None:
    schema = {"$ref": f"#/components/schemas/{component}", "components": DOC["components"]}
    validator = jsonschema_rs.validator_for(schema, validate_formats=True)
    errors = [f"{e.instance_path}: {e.message}" for e in validator.iter_errors(body)]
    assert not errors, (component, errors)


def _step(**fields: Any) -> dict[str, Any]:
    """A step as app.api.queries.steps_of reads it."""
    return {"output": None, "error": None, "started_at": NOW, "finished_at": None,
            "output_preview": None, "output_bytes": 10, **fields}


def _job(**changes: Any) -> AgentJob:
    fields: dict[str, Any] = dict(
        id=uuid.uuid4(), project_id=uuid.uuid4(), job_type="system.canary", status="failed",
        attempts=1, max_attempts=3, priority=5, payload={"steps": 2}, result=None,
        last_error="boom", created_at=NOW, started_at=NOW, completed_at=NOW,
        parent_job_id=uuid.uuid4())
    return AgentJob(**{**fields, **changes})


def _effect(resolution: dict[str, Any] | None) -> EffectRecord:
    return EffectRecord(
        id=str(uuid.uuid4()), idempotency_key="k", project_id=str(uuid.uuid4()),
        approval_id=None, job_id=str(uuid.uuid4()), action_type="deploy_hook",
        args={"url": "[redacted]"}, status="succeeded" if resolution else "unknown",
        provider_ref=None, response={"resolution": resolution} if resolution else None,
        error=None, created_at=NOW, completed_at=NOW if resolution else None)


def _packet() -> dict[str, Any]:
    job = uuid.uuid4()
    action = {"type": "deploy_hook", "title": "Deploy", "args": {"url": "https://h.example"}}
    approval = {"id": uuid.uuid4(), "source_job_id": job, "args_hash": "h",
                "status": "approved", "version": 2, "execution_status": "completed",
                "execution_job_id": uuid.uuid4(), "decided_at": NOW}
    packet = {"id": uuid.uuid4(), "phase": 0, "job_id": job, "created_at": NOW,
              "content": {"title": "T", "summary": "S", "insights": ["i"],
                          "actions": [action, {"type": "email", "title": "Mail", "args": {}}]},
              "job_result": {"approval_ids": [str(approval["id"]), str(uuid.uuid4())]}}
    return packet_json(packet, [approval])


# (what, the component, the serializer's answer): one row per serializer and variant.
SERIALIZED = [
    ("a project", "Project", lambda: project_json(Project(
        id=uuid.uuid4(), owner_id=uuid.uuid4(), name="p", goal=None, night_shift=False,
        phase="idea", settings={"caps": {}}, created_at=NOW))),
    ("a job in a list: no steps", "JobSummary", lambda: job_json(_job())),
    ("a queued job read alone, with no steps yet", "Job", lambda: job_json(
        _job(status="queued", started_at=None, completed_at=None, parent_job_id=None), [])),
    ("a job with a finished, a running and a cut step", "Job", lambda: job_json(_job(), [
        _step(seq=1, name="a", status="completed", output={"n": 1}, attempts=1,
              finished_at=NOW),
        _step(seq=2, name="b", status="running", attempts=2),
        _step(seq=3, name="c", status="completed", attempts=1, output_preview='{"blob": "xx',
              output_bytes=9000, finished_at=NOW)])),
    ("an approval", "Approval", lambda: approval_json(Approval(
        id=uuid.uuid4(), project_id=uuid.uuid4(), action_type="email", title="Mail",
        action_args={"to": "a@b.c"}, args_hash="h", status="pending", version=1,
        expires_at=None, decided_at=None, execution_status="idle", execution_job_id=None,
        source_job_id=uuid.uuid4(), created_at=NOW))),
    ("an unknown effect", "Effect", lambda: effect_json(_effect(None))),
    ("a resolved effect", "Effect", lambda: effect_json(_effect(
        {"status": "succeeded", "note": "checked", "by": str(uuid.uuid4())}))),
    ("a packet, one action approved, one not yet", "PacketList", lambda: {"items": [_packet()]}),
    ("LLM usage", "LlmUsage", lambda: usage_json([
        Usage(1, "research", 2, 100, 50, Decimal("0.0123")),
        Usage(None, None, 1, 10, 5, Decimal("0"))])),
    ("no LLM usage", "LlmUsage", lambda: usage_json([])),
    ("a job's event", "Event", lambda: Event(
        7, uuid.uuid4(), uuid.uuid4(), "status", "failed", {"status": "failed"}, NOW).as_json()),
    ("a project's event", "Event", lambda: Event(
        8, None, uuid.uuid4(), "log", "", {}, NOW).as_json()),
    ("an error", "Error", lambda: _body("not_found", "job not found")),
]


@pytest.mark.parametrize(("what", "component", "serialize"), SERIALIZED,
                         ids=[row[0] for row in SERIALIZED])
def test_what_each_serializer_builds_is_what_the_document_says(
        what: str, component: str, serialize: Any) -> None:
    _validates(component, serialize())


def test_times_keep_the_offset_the_api_has_always_written() -> None:
    body = job_json(_job())
    assert body["created_at"] == "2025-05-01T12:30:00+00:00"  # isoformat(), not pydantic's "Z"
    assert body["id"] == str(uuid.UUID(body["id"])) and body["started_at"] == NOW.isoformat()


def test_a_serializer_refuses_a_value_its_model_does_not_allow() -> None:
    with pytest.raises(ValidationError, match="status"):
        job_json(_job(status="lost"))
