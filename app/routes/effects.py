"""The effect ledger for people: list a project's effects, resolve one whose outcome is unknown."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from flask import Blueprint, jsonify, request
from pydantic import Field

from app.api import responses
from app.api.queries import require_project
from app.api.schemas import Strict, Text
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found
from app.routes.body import parse_body
from tasks.services.effects import ledger, review
from tasks.services.effects.records import EffectRecord

bp = Blueprint("effects", __name__)


class ResolveBody(Strict):
    outcome: Literal["succeeded", "failed"]
    note: Text = Field(default="", max_length=2000)


def effect_json(e: EffectRecord) -> dict[str, Any]:
    resolution = review.resolution_of(e)
    return responses.Effect(
        id=e.id, kind=e.action_type, key=e.idempotency_key, status=e.status,
        provider_ref=e.provider_ref, args=e.args, error=e.error, approval_id=e.approval_id,
        job_id=e.job_id, created_at=e.created_at, updated_at=e.completed_at or e.created_at,
        completed_at=e.completed_at,
        resolution=None if resolution is None else responses.Resolution(
            outcome=resolution.outcome, note=resolution.note, by=resolution.by,
            at=e.completed_at)).dump()


@bp.get("/api/projects/<pid>/effects")
def list_effects(pid: str):
    project = require_project(db.session(), current_owner(), pid)
    status = request.args.get("status") or None
    if status is not None and status not in review.STATUSES:
        raise ApiError(422, "validation_error", f"unknown status {status!r}: one of "
                       f"{', '.join(review.STATUSES)}", {"field": "status"})
    return jsonify({"items": [effect_json(e) for e in review.effects_for(str(project.id),
                                                                          status)]})


@bp.post("/api/effects/<eid>/resolve")
def resolve_effect(eid: str):
    try:
        effect_id = str(uuid.UUID(eid))
    except ValueError:
        raise not_found("effect") from None
    owner = str(current_owner())
    effect = review.effect_of_owner(effect_id, owner)
    if effect is None:
        raise not_found("effect")
    body = parse_body(ResolveBody)
    resolved = ledger.resolve_unknown(effect_id, project_id=effect.project_id,
                                      status=body.outcome, note=body.note, by=owner)
    if resolved is None:
        current = review.effect_of_owner(effect_id, owner)
        now = current.status if current is not None else "gone"
        raise ApiError(409, "effect_not_unknown", f"this effect is {now}: only an unknown "
                       "effect can be resolved, and a known outcome is never overwritten",
                       {"status": now})
    return jsonify(effect_json(review.effect_of_owner(effect_id, owner) or resolved))
