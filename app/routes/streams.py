"""A project's live events: Server-Sent Events and WebSocket, both fed by the event hub;
and pages of older events, for a client that opened a stream at a recent window.

Both take a stream slot (app.streams.stream_slots) before any 200 and end after the
stream's lifetime. The WebSocket takes no input: a thread of its own reads and
drops whatever the client sends (unread frames would pile up in the server's
memory), closing the socket with 1008 past INPUT_BUDGET bytes; a single message
over MAX_MESSAGE bytes is refused by the WebSocket server itself (1009).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from flask import Blueprint, g, jsonify, request
from flask_sock import Sock
from pydantic import ValidationError
from simple_websocket import ConnectionClosed

from app.api.queries import job_for_owner, require_project
from app.api.schemas import EventPageQuery
from app.http import db
from app.http.auth import current_owner
from app.http.errors import not_found, validation_error
from app.streams import event_log
from app.streams.hub import Subscription
from app.streams.sse import Started, client_gone, event_stream, sse_response, stream_cursor
from app.streams.stream_slots import take_slot

bp = Blueprint("streams", __name__)
sock = Sock()

MAX_MESSAGE = 64 * 1024       # bytes in one client message (SOCK_SERVER_OPTIONS)
INPUT_BUDGET = 256 * 1024     # bytes a client may send over a socket's whole life
POLICY_VIOLATION, GOING_AWAY = 1008, 1001


def _owned_project_id(pid: str):
    project_id = require_project(db.session(), current_owner(), pid).id
    db.release()  # a stream holds its thread for minutes: no connection meanwhile
    return project_id


@bp.get("/api/projects/<pid>/events")
def project_events(pid: str):
    sub = Subscription(project_id=_owned_project_id(pid))
    cursor = stream_cursor(sub)
    slot = take_slot()  # before any 200: over the cap is a 429
    return sse_response(event_stream(sub, cursor, mark_replay=True,
                                     gone=client_gone(request.environ)), slot)


@bp.get("/api/projects/<pid>/events/history")
def project_event_history(pid: str):
    return _older(Subscription(project_id=_owned_project_id(pid)))


@bp.get("/api/jobs/<jid>/events/history")
def job_event_history(jid: str):
    job = job_for_owner(db.session(), current_owner(), jid)
    if job is None:
        raise not_found("job")
    return _older(Subscription(job_id=job.id))


def _older(sub: Subscription):
    try:
        query = EventPageQuery.model_validate(request.args.to_dict())
    except ValidationError as exc:
        raise validation_error(exc, where="query string") from None
    events, nxt = event_log.older(sub, query.before, query.limit, query.type_list())
    return jsonify({"items": [e.as_json() for e in events], "next": nxt})


@bp.before_request
def _refuse_socket_before_upgrade() -> None:
    """A WebSocket's 404 or 400 must be a plain HTTP answer: flask-sock accepts the
    upgrade before the route's body runs, so the checks happen here, before it."""
    if request.endpoint == "streams.project_socket":
        g.socket_sub = Subscription(project_id=_owned_project_id((request.view_args or {})["pid"]))
        g.socket_cursor = stream_cursor(g.socket_sub)
        g.socket_slot = take_slot()


@bp.teardown_request
def _give_socket_slot_back(_exc: BaseException | None) -> None:
    # Teardown runs however the socket ended, even when the upgrade itself failed.
    slot = g.pop("socket_slot", None)
    if slot is not None:
        slot.release()


@sock.route("/ws/projects/<pid>", bp=bp)
def project_socket(ws: Any, pid: str) -> None:
    stream = event_stream(g.socket_sub, g.socket_cursor)
    done = threading.Event()
    threading.Thread(target=_discard_input, args=(ws, done), name="ws-input",
                     daemon=True).start()
    try:
        for e in stream:
            if done.is_set():
                return  # the input side closed the socket
            if e is not None and not isinstance(e, Started):  # keep-alives: WS pings
                ws.send(json.dumps(e.as_json()))
        ws.close(GOING_AWAY, "the stream's lifetime is over: reconnect with your cursor")
    except ConnectionClosed:
        pass
    finally:
        done.set()
        stream.close()


def _discard_input(ws: Any, done: threading.Event) -> None:
    """Read and drop what the client sends; close the socket once it has sent too much."""
    received = 0
    try:
        while not done.is_set():
            data = ws.receive(timeout=1)
            if data is None:
                continue
            received += len(data)
            if received > INPUT_BUDGET:
                ws.close(POLICY_VIOLATION, "this stream takes no input")
                break
    except ConnectionClosed:
        pass
    finally:
        done.set()
