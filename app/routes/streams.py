"""A project's live events: Server-Sent Events and WebSocket, both fed by the event hub."""

from __future__ import annotations

import json

from flask import Blueprint, g, request
from flask_sock import Sock
from simple_websocket import ConnectionClosed

from app import db
from app.auth import current_owner
from app.hub import Subscription
from app.queries import require_project
from app.sse import cursor_from_request, event_stream, sse_response

bp = Blueprint("streams", __name__)
sock = Sock()


def _owned_project_id(pid: str):
    project_id = require_project(db.session(), current_owner(), pid).id
    db.close_session()  # no database session is held while the stream is open
    return project_id


@bp.get("/api/projects/<pid>/events")
def project_events(pid: str):
    project_id = _owned_project_id(pid)
    return sse_response(event_stream(Subscription(project_id=project_id),
                                     cursor_from_request()))


@bp.before_request
def _refuse_socket_before_upgrade() -> None:
    """A WebSocket's 404 or 400 must be a plain HTTP answer: flask-sock accepts the
    upgrade before the route's body runs, so the checks happen here, before it."""
    if request.endpoint == "streams.project_socket":
        g.socket_project_id = _owned_project_id((request.view_args or {})["pid"])
        g.socket_cursor = cursor_from_request()


@sock.route("/ws/projects/<pid>", bp=bp)
def project_socket(ws, pid: str) -> None:
    stream = event_stream(Subscription(project_id=g.socket_project_id), g.socket_cursor)
    try:
        for e in stream:
            if e is not None:  # keep-alives are WebSocket pings (SOCK_SERVER_OPTIONS)
                ws.send(json.dumps(e.as_json()))
    except ConnectionClosed:
        pass
    finally:
        stream.close()
