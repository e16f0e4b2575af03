"""Monitor: queues and workers (authenticated), Prometheus metrics (public, aggregates only)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app import db, metrics, monitor
from app.auth import current_owner

bp = Blueprint("monitor", __name__)


@bp.get("/api/monitor/queues")
def queues():
    return jsonify(monitor.queue_stats(db.session(), current_owner()))


@bp.get("/api/monitor/workers")
def workers():
    return jsonify(monitor.workers(db.session()))


@bp.get("/metrics")
def prometheus():
    return Response(metrics.render(), mimetype="text/plain; version=0.0.4; charset=utf-8")
