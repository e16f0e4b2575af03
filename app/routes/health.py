"""Liveness and readiness probes (no auth)."""

from __future__ import annotations

from flask import Blueprint, jsonify
from sqlalchemy import text

from app.http import db
from app.http.errors import DATABASE_RETRY_AFTER, ApiError
from tasks.celery_app import app as celery_app

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


@bp.get("/readyz")
def readyz():
    checks: dict[str, str] = {}
    try:
        db.session().execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"error: {type(exc).__name__}"
    if any(v != "ok" for v in checks.values()):  # a 5xx body has the contract's error shape
        raise ApiError(503, "not_ready", "the database or the broker does not answer",
                       {"checks": checks}, headers={"Retry-After": DATABASE_RETRY_AFTER})
    return jsonify({"status": "ready", "checks": checks})
