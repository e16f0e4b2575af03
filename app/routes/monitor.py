"""Monitor: queues and workers (the caller's jobs; an admin token's fleet), and Prometheus
metrics (the operator's, behind SWITCHYARD_METRICS_TOKEN)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api import monitor
from app.api import schedules as project_schedules
from app.http import db
from app.http.auth import current_viewer, require_metrics_token
from app.ops import metrics

bp = Blueprint("monitor", __name__)


@bp.get("/api/monitor/queues")
def queues():
    return jsonify(monitor.queue_stats(db.session(), current_viewer()))


@bp.get("/api/monitor/workers")
def workers():
    return jsonify(monitor.workers(db.session(), current_viewer()))


@bp.get("/api/monitor/schedules")
def schedules():
    """Each project's daily schedules, its time zone and their next runs."""
    return jsonify(project_schedules.schedules(db.session(), current_viewer()))


@bp.get("/metrics")
def prometheus():
    require_metrics_token()
    return Response(metrics.render(), mimetype="text/plain; version=0.0.4; charset=utf-8")
