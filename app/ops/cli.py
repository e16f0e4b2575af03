"""`switchyard`: run the system (embedded or against real services) and operate it."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from app.ops.commands import beat_command, web_command, worker_command

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


# SQLSTATE classes that mean the database could not be reached as configured: a connection
# exception, a refused login, no such database, a server shutting down or starting. A
# failure to connect at all carries none.
_UNREACHABLE = ("08", "28", "3D", "57P")


def _unreachable(error: BaseException) -> bool:
    sqlstate = getattr(error, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(_UNREACHABLE)


class _Commands(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        import psycopg
        import sqlalchemy.exc

        from tasks.settings import SettingsError

        try:
            return super().invoke(ctx)
        except SettingsError as exc:  # its message names the variable and what it wants
            raise click.ClickException(str(exc)) from None
        except (psycopg.OperationalError, sqlalchemy.exc.OperationalError) as exc:
            cause = getattr(exc, "orig", None) or exc
            if not _unreachable(cause):
                raise  # a deadlock, a lock timeout, a full disk: its own traceback
            from tasks.settings import get_settings

            why = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
            raise click.ClickException(
                f"cannot reach the database ({why}). Set DATABASE_URL to your PostgreSQL, or "
                "run this beside `switchyard up` with the same SWITCHYARD_DATA_DIR "
                f"({get_settings().data_dir}): up tells the commands beside it where its "
                "embedded services are.") from None


@click.group(cls=_Commands)
@click.pass_context
def main(ctx: click.Context) -> None:
    """Switchyard: durable jobs for AI agents on Celery and PostgreSQL."""
    if ctx.invoked_subcommand != "up":  # up makes its own, and must not take a stale file's
        from app.ops import beside_up
        from tasks.settings import get_settings

        if beside_up.adopt(get_settings().data_dir):
            get_settings.cache_clear()


def _check_systems() -> None:
    """Every system's own settings (its model provider, its effects' policy), checked as
    its modules load: here, where a wrong one is one line, not in the process exec'd next,
    where it was a traceback (or, for the model provider, each job's failure)."""
    import tasks.catalog  # noqa: F401 - registers each system's settings check


@main.command()
def migrate() -> None:
    """Upgrade the database to the newest schema."""
    from app.ops.migrations import upgrade

    upgrade()
    click.echo("database is at the newest migration")


@main.command()
def doctor() -> None:
    """What this machine has and lacks for each system, with the fix for each gap."""
    from app.ops.doctor import exit_code, render, run_checks

    checks = run_checks()
    click.echo(render(checks))
    sys.exit(exit_code(checks))


@main.command()
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--threads", default=64, show_default=True, type=int)
@click.option("--workers", "-w", default=1, show_default=True, type=click.IntRange(1, 64),
              help="web processes")
def web(port: int, host: str, threads: int, workers: int) -> None:
    """The HTTP control plane on gunicorn's gthread worker (SSE and WebSocket need threads)."""
    _check_systems()
    os.execvp(sys.executable, web_command(host, port, threads, workers))


@main.command()
@click.option("--concurrency", "-c", type=int, default=None, help="threads (or processes)")
@click.option("--queues", "-Q", default=None, help="comma-separated, default: all")
@click.option("--pool", "-P", default=None, help="threads (default), prefork, solo")
@click.option("--name", "-n", default=None,
              help="Celery node name, unique per host (default: worker-<random>@<host>)")
def worker(concurrency: int | None, queues: str | None, pool: str | None,
           name: str | None) -> None:
    """A Celery worker running jobs."""
    _check_systems()
    os.execvp(sys.executable, worker_command(concurrency, queues, pool, name))


@main.command()
def beat() -> None:
    """Celery beat: the recovery sweeps and the schedules."""
    _check_systems()
    os.execvp(sys.executable, beat_command())


@main.group()
def token() -> None:
    """API tokens: create, list, revoke."""


@token.command("create")
@click.argument("owner")
@click.option("--admin", is_flag=True, help="the monitor and diagnosis show this token the "
              "whole fleet (every tenant's queues and workers)")
def token_create(owner: str, admin: bool) -> None:
    """Create a token for OWNER (created if new). The token is the last line printed."""
    from app.http.tokens import create_token

    with _session() as session:
        owner_id, secret = create_token(session, owner, admin=admin)
    kind = "an admin token" if admin else "a token"
    click.echo(f"owner {owner} ({owner_id}), {kind}; keep it, it is not shown again:")
    click.echo(secret)


@token.command("list")
def token_list() -> None:
    from app.http.tokens import list_tokens

    with _session() as session:
        for t in list_tokens(session):
            state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else "active"
            click.echo(f"{t.id}  {t.prefix}…  {t.owner:<20} {state}"
                       + ("  admin" if t.admin else ""))


@token.command("revoke")
@click.argument("token_id_or_prefix")
def token_revoke(token_id_or_prefix: str) -> None:
    from app.http.tokens import revoke_token

    with _session() as session:
        n = revoke_token(session, token_id_or_prefix)
    if not n:
        raise click.ClickException("no active token matches")
    click.echo(f"revoked {n} token(s)")


@main.command()
@click.argument("project")
@click.argument("job_type")
@click.option("--payload", default="{}", help="JSON object")
@click.option("--key", default=None, help="idempotency key")
@click.option("--priority", type=click.IntRange(0, 9), default=None)
def enqueue(project: str, job_type: str, payload: str, key: str | None,
            priority: int | None) -> None:
    """Enqueue a job (the system project is 00000000-0000-0000-0000-000000000000)."""
    import tasks.catalog  # noqa: F401 - registers every job type
    from tasks.engine.enqueue import EnqueueRequest
    from tasks.engine.enqueue import enqueue as do_enqueue
    from tasks.engine.errors import SwitchyardError

    try:
        uuid.UUID(project)
    except ValueError:
        raise click.BadParameter("PROJECT must be a project id (a UUID; the system project is "
                                 "00000000-0000-0000-0000-000000000000)") from None
    try:
        body = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    try:
        result = do_enqueue(EnqueueRequest(project_id=project, job_type=job_type, payload=body,
                                           idempotency_key=key, priority=priority))
    except SwitchyardError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{result.job_id} {'created' if result.created else 'existing'} {result.status}")


@main.command()
@click.option("--project", default=None)
@click.option("--status", default=None)
@click.option("--limit", default=20, show_default=True)
def jobs(project: str | None, status: str | None, limit: int) -> None:
    """The newest jobs."""
    from tasks.engine import pg

    rows = pg.fetch_dicts(
        "SELECT id, job_type, status, attempts, created_at FROM agent_jobs "
        "WHERE (%(p)s::uuid IS NULL OR project_id = %(p)s::uuid) "
        "AND (%(s)s::text IS NULL OR status = %(s)s::text) "
        "ORDER BY created_at DESC LIMIT %(n)s", {"p": project, "s": status, "n": limit})
    for r in rows:
        click.echo(f"{r['id']}  {r['job_type']:<28} {r['status']:<10} "
                   f"attempts={r['attempts']}  {r['created_at']:%H:%M:%S}")


@main.command()
@click.argument("job_id")
def tail(job_id: str) -> None:
    """Follow a job's events until it ends."""
    from tasks.engine import pg
    from tasks.engine.status import TERMINAL, JobStatus

    cursor = 0
    while True:
        rows = pg.fetch_dicts("SELECT id, type, message, data, created_at FROM agent_job_events "
                              "WHERE job_id = %s AND id > %s ORDER BY id", (job_id, cursor))
        for r in rows:
            eid, etype, message, data, created = (
                r["id"], r["type"], r["message"], r["data"], r["created_at"])
            cursor = eid
            click.echo(f"{created:%H:%M:%S.%f} #{eid} {etype:<7} {message} {json.dumps(data)}")
            if etype == "status" and JobStatus(data["status"]) in TERMINAL:
                return
        time.sleep(0.3)


@main.command()
@click.option("--port", default=8000, show_default=True, type=int)
def up(port: int) -> None:
    """Start everything: embedded PostgreSQL and Redis unless configured, web, worker, beat."""
    from app.ops.launcher import run_all

    _check_systems()
    run_all(port)


@contextmanager
def _session() -> Iterator[Session]:
    """One atomic unit of work (the session's statements join the transaction: app.http.db)."""
    from app.http.db import session_factory
    from models.db import session_scope
    from tasks.engine import pg

    with pg.transaction(), session_scope(session_factory()) as session:
        yield session


if __name__ == "__main__":
    main()
