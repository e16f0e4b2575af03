"""Liveness and readiness probes (no auth)."""

from __future__ import annotations

import math
import threading
import time
from functools import lru_cache

from flask import Blueprint, jsonify, request
from sqlalchemy import text

from app.http import db
from app.http.auth import client_bucket
from app.http.errors import DATABASE_RETRY_AFTER, ApiError
from app.http.ratelimit import RateLimiter
from app.ops.migrations import database_version, schema_problem
from tasks.celery_app import app as celery_app

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


# /readyz needs no token, so anyone may call it: each address gets a few probes a second
# (a load balancer's come every few seconds), and the broker, which costs a new connection
# to ask, is asked at most once per BROKER_TTL seconds per process. The database is asked
# every time, on the request's pooled connection: an outage shows at the next probe.
PROBES_PER_SECOND, PROBE_BURST = 5.0, 20.0
BROKER_TTL = 2.0
_broker_lock = threading.Lock()
_broker: tuple[float, str] = (-BROKER_TTL, "")


@lru_cache(maxsize=1)
def probe_limiter() -> RateLimiter:
    return RateLimiter(PROBES_PER_SECOND, PROBE_BURST)


@bp.get("/readyz")
def readyz():
    wait = probe_limiter().acquire(client_bucket(request.remote_addr or ""))
    if wait:
        raise ApiError(429, "rate_limited", "too many readiness probes from this address",
                       headers={"Retry-After": str(max(1, math.ceil(wait)))})
    checks: dict[str, str] = {}
    try:
        db.session().execute(text("SELECT 1"))
        checks["database"] = "ok"
        # An unmigrated database answered "ready", then every request failed with a 500
        version = database_version(lambda sql: db.session().execute(text(sql)).scalar())
        checks["migrations"] = schema_problem(version) or "ok"
    except Exception as exc:
        # Whichever of the two it reached failed: a migrations check that could not be made
        # must not leave the key out of a 200 (the document requires it)
        checks["migrations" if "database" in checks else "database"] = \
            f"error: {type(exc).__name__}"
    checks["broker"] = _broker_status()
    if any(v != "ok" for v in checks.values()):  # a 5xx body has the contract's error shape
        wrong = [f"{name}: {v}" for name, v in checks.items() if v != "ok"]
        raise ApiError(503, "not_ready", "not ready (" + "; ".join(wrong) + ")",
                       {"checks": checks}, headers={"Retry-After": DATABASE_RETRY_AFTER})
    return jsonify({"status": "ready", "checks": checks})


def _broker_status() -> str:
    global _broker
    with _broker_lock:  # one probe asks at a time; the others share its answer
        checked_at, status = _broker
        if time.monotonic() - checked_at < BROKER_TTL:
            return status
        try:
            with celery_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
            status = "ok"
        except Exception as exc:
            status = f"error: {type(exc).__name__}"
        _broker = (time.monotonic(), status)
        return status
