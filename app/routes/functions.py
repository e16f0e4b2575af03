"""Functions: save a project's JavaScript as immutable versions (syntax-checked in the
sandbox first), read them, start runs (`function.run`) and list a function's runs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from flask import Blueprint, jsonify, request, url_for
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.queries import require_project
from app.api.responses import (
    FunctionDetail,
    FunctionList,
    FunctionRunList,
    FunctionSaved,
)
from app.api.schemas import Integral, Text, has_nul
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found
from app.routes.body import parse_body
from models import Project
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.functions import runs, sandbox, store

bp = Blueprint("functions", __name__)
RUNS_LIMIT = 50
RUNS_MAX = 200


class FunctionBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(pattern=store.NAME_PATTERN, description=store.NAME_RULE)
    code: Text = Field(min_length=1, max_length=store.CODE_MAX)
    language: Literal["javascript"] = "javascript"
    description: Text = Field(default="", max_length=store.DESCRIPTION_MAX)


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    # Any JSON PostgreSQL can store (no NUL in a string or a key): app.api.openapi says so.
    input: Any = None
    version: Annotated[int, Field(ge=1), Integral] | None = None  # None: the newest
    idempotency_key: Text | None = Field(default=None, min_length=1, max_length=255)

    @field_validator("input")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        if has_nul(value):
            raise ValueError("must not contain the NUL character (\\u0000) in a string or a key")
        return value


def _project(pid: str) -> Project:
    return require_project(db.session(), current_owner(), pid)


def _function(project: Project, name: str, version: int | None) -> store.FunctionVersion:
    known = store.NAME.fullmatch(name) and (version is None or 1 <= version <= 2**31 - 1)
    found = store.get(project.id, name, version) if known else None
    if found is None:
        raise not_found("function" if version is None else f"version {version} of function")
    return found


@bp.post("/api/projects/<pid>/functions")
def save_function(pid: str):
    project_id = _project(pid).id
    body = parse_body(FunctionBody)
    # The check may take its whole limit (hostile code runs while it is compiled): the
    # request gives its database connection back first, and borrows one again to save.
    db.release()
    problem = sandbox.check_syntax(body.code)
    if problem is not None:
        raise ApiError(422, "invalid_function", problem.headline,
                       {"line": problem.line, "column": problem.column,
                        "problem": problem.message})
    saved = store.save(project_id, body.name, body.code, language=body.language,
                       description=body.description)
    return jsonify(FunctionSaved(name=saved.name, version=saved.version).dump()), \
        201 if saved.created else 200


@bp.get("/api/projects/<pid>/functions")
def list_functions(pid: str):
    project = _project(pid)
    return jsonify(FunctionList.model_validate(
        {"items": [vars(f) for f in store.listing(project.id)]}).dump())


def _detail(project: Project, name: str, version: int | None) -> dict[str, Any]:
    fn = _function(project, name, version)
    return FunctionDetail.model_validate({
        **vars(fn), "versions": [vars(v) for v in store.versions(project.id, name)]}).dump()


@bp.get("/api/projects/<pid>/functions/<name>")
def get_function(pid: str, name: str):
    project = _project(pid)
    raw = request.args.get("version")
    if raw is not None and not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 2**31 - 1):
        raise ApiError(422, "validation_error", "version must be a whole number from 1",
                       {"fields": {"version": "must be a whole number from 1"}})
    return jsonify(_detail(project, name, int(raw) if raw is not None else None))


@bp.get("/api/projects/<pid>/functions/<name>/versions/<int:version>")
def get_function_version(pid: str, name: str, version: int):
    return jsonify(_detail(_project(pid), name, version))


@bp.post("/api/projects/<pid>/functions/<name>/runs")
def run_function(pid: str, name: str):
    project = _project(pid)
    body = parse_body(RunBody)
    fn = _function(project, name, body.version)
    job = enqueue(EnqueueRequest(project.id, "function.run",
                                 {"name": fn.name, "version": body.version, "input": body.input},
                                 idempotency_key=body.idempotency_key))
    return jsonify({"job_id": str(job.job_id),
                    "status_url": url_for("jobs.get_job", jid=str(job.job_id))}), \
        202 if job.created else 200


@bp.get("/api/projects/<pid>/functions/<name>/runs")
def list_function_runs(pid: str, name: str):
    project = _project(pid)
    fn = _function(project, name, None)
    raw = request.args.get("limit", str(RUNS_LIMIT))
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= RUNS_MAX):
        raise ApiError(422, "validation_error", f"limit must be a whole number from 1 to "
                       f"{RUNS_MAX}", {"fields": {"limit": f"from 1 to {RUNS_MAX}"}})
    items = [{**vars(r), "job_url": url_for("jobs.get_job", jid=str(r.job_id))}
             for r in runs.of_function(project.id, fn.name, int(raw))]
    return jsonify(FunctionRunList.model_validate({"items": items}).dump())
