"""The Flask application factory. Workers never import this module."""

from __future__ import annotations

import logging

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

import tasks.catalog  # noqa: F401 - registers every job type
from app.http import db, pgpool
from app.http.auth import require_token
from app.http.errors import register_error_handlers
from app.http.unread_body import CloseUnreadBody
from app.routes import (
    artifacts,
    code,
    effects,
    functions,
    health,
    jobs,
    monitor,
    openapi,
    outputs,
    owner_jobs,
    plans,
    projects,
    secrets,
    startup,
    streams,
    ui,
    workflows,
)
from tasks.engine import pg, telemetry
from tasks.settings import get_settings

MAX_BODY_BYTES = 1024 * 1024


def create_app() -> Flask:
    settings = get_settings()
    logging.basicConfig(level=settings.log_level,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    telemetry.setup("switchyard-web")  # OTEL_* variables set: traces over OTLP; else nothing
    app = Flask("switchyard")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["SOCK_SERVER_OPTIONS"] = {"ping_interval": 15,
                                         "max_message_size": streams.MAX_MESSAGE}
    app.json.sort_keys = False  # type: ignore[attr-defined]
    register_error_handlers(app)
    app.before_request(require_token)
    # A request's ORM session and the engine's statements share one pooled connection
    # (app/http/db.py, app/http/pgpool.py), given back when the request ends.
    pgpool.pool.resize(settings.web_db_connections)
    pg.lend_from(pgpool.pool)
    app.teardown_request(db.release)
    for bp in (health.bp, projects.bp, jobs.bp, streams.bp, monitor.bp, openapi.bp,
               owner_jobs.bp, startup.bp, secrets.bp, effects.bp, outputs.bp, artifacts.bp,
               code.bp, workflows.bp, plans.bp, functions.bp, ui.bp):
        app.register_blueprint(bp)
    streams.sock.init_app(app)
    telemetry.instrument_flask(app)
    app.wsgi_app = CloseUnreadBody(app.wsgi_app)  # type: ignore[method-assign]
    if settings.trusted_proxies:  # the client's address, as the operator's proxies saw it
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=settings.trusted_proxies, x_proto=settings.trusted_proxies)
    return app
