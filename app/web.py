"""The Flask application factory. Workers never import this module."""

from __future__ import annotations

import logging

from flask import Flask

from app import db, pgpool
from app.auth import require_token
from app.errors import register_error_handlers
from app.routes import (
    health,
    jobs,
    monitor,
    openapi,
    owner_jobs,
    projects,
    startup,
    streams,
    ui,
)
from tasks import pg
from tasks.settings import get_settings

MAX_BODY_BYTES = 1024 * 1024


def create_app() -> Flask:
    settings = get_settings()
    logging.basicConfig(level=settings.log_level,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    app = Flask("switchyard")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["SOCK_SERVER_OPTIONS"] = {"ping_interval": 15,
                                         "max_message_size": streams.MAX_MESSAGE}
    app.json.sort_keys = False  # type: ignore[attr-defined]
    register_error_handlers(app)
    app.before_request(require_token)
    app.teardown_appcontext(db.close_session)
    # The engine's statements borrow a pooled connection per request (app/pgpool.py).
    pg.lend_from(pgpool.pool)
    app.teardown_request(lambda _exc: pg.release())
    for bp in (health.bp, projects.bp, jobs.bp, streams.bp, monitor.bp, openapi.bp,
               owner_jobs.bp, startup.bp, ui.bp):
        app.register_blueprint(bp)
    streams.sock.init_app(app)
    return app
