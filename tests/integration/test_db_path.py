"""A web request reaches PostgreSQL on one connection: its ORM session and the engine share it."""

from __future__ import annotations

import threading
import uuid

from flask import Flask
from sqlalchemy import text

from app.http import db as web_db
from app.http.tokens import create_token
from app.web import create_app
from models import Project
from models.db import session_scope
from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue


def _project() -> uuid.UUID:
    with session_scope(web_db.session_factory()) as s:
        owner_id, _ = create_token(s, "alice")
    project = uuid.uuid4()
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'p')",
               (project, owner_id))
    return project


def test_a_request_s_session_runs_on_the_connection_the_engine_borrowed(db: None) -> None:
    app: Flask = create_app()
    with app.test_request_context():
        web_db.session().execute(text("SELECT 1"))
        pg.execute("SELECT 1")
        session_conn = web_db.session().connection().connection.driver_connection
        assert session_conn is pg.connection()


def test_a_request_that_enqueues_while_its_session_holds_a_lock_does_not_wait_for_itself(
        db: None) -> None:
    # Given a request whose session has locked its project row in a transaction
    project, app = _project(), create_app()
    outcome: list[object] = []

    def request() -> None:
        with app.test_request_context():
            try:
                pg.execute("SET lock_timeout = '3s'")  # a wait on ourselves fails, not hangs
                with pg.transaction():
                    locked = web_db.session().get(Project, project, with_for_update=True)
                    assert locked is not None
                    # When it enqueues a job of that project (its insert checks the row)
                    outcome.append(enqueue(EnqueueRequest(project, "system.canary", {}),
                                           publish=False).created)
            except Exception as exc:  # reported below
                outcome.append(exc)
            finally:
                pg.execute("RESET lock_timeout")

    t = threading.Thread(target=request)
    t.start()
    t.join(20)

    # Then the insert does not wait on its own request's lock
    assert outcome == [True]
