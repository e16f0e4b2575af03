"""A project's secrets: set, list (names and times only), delete. Values never come back.

The values are sealed by tasks.services.keystore; this module only checks the caller owns
the project and the name is one a secret may have.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify
from pydantic import Field

from app.api.queries import require_project
from app.api.schemas import Strict, Text, iso
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found
from app.routes.body import parse_body
from tasks.services import keystore

bp = Blueprint("secrets", __name__)


class SecretBody(Strict):
    value: Text = Field(min_length=1, max_length=keystore.VALUE_MAX)


def _project_id(pid: str) -> str:
    return str(require_project(db.session(), current_owner(), pid).id)


def _name(name: str) -> str:
    if not keystore.NAME.fullmatch(name):
        raise ApiError(422, "validation_error", f"invalid secret name: {keystore.NAME_RULE}",
                       {"fields": {"name": keystore.NAME_RULE}})
    return name


@bp.put("/api/projects/<pid>/secrets/<name>")
def put_secret(pid: str, name: str):
    project_id = _project_id(pid)
    name = _name(name)
    if not keystore.put(project_id, name, parse_body(SecretBody).value):
        raise ApiError(409, "too_many_secrets", f"a project keeps at most "
                       f"{keystore.MAX_PER_PROJECT} secrets: delete one first")
    return Response(status=204)


@bp.get("/api/projects/<pid>/secrets")
def list_secrets(pid: str):
    items = keystore.listing(_project_id(pid))
    return jsonify({"items": [{"name": s.name, "created_at": iso(s.created_at),
                               "updated_at": iso(s.updated_at)} for s in items]})


@bp.delete("/api/projects/<pid>/secrets/<name>")
def delete_secret(pid: str, name: str):
    project_id = _project_id(pid)
    if not keystore.delete(project_id, _name(name)):
        raise not_found("secret")
    return Response(status=204)
