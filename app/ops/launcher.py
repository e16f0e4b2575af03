"""`switchyard up`: the whole system in one command, stopped cleanly on Ctrl-C.

Without DATABASE_URL / BROKER_URL it starts a real PostgreSQL and Redis from pip
packages under SWITCHYARD_DATA_DIR (and, without an SMTP server or Resend key, a
local SMTP server that files every email under SWITCHYARD_DATA_DIR/mail); then
it migrates, prints the URL and a token, and runs web, worker and beat as child
processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import click

from app.ops import beside_up
from app.ops.commands import beat_command, web_command, worker_command
from app.ops.embedded import embedded_postgres, embedded_redis, embedded_smtp
from tasks.engine import pg
from tasks.engine.queues import QUEUES
from tasks.services.private_files import write_private
from tasks.settings import get_settings

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
RESTARTS = 3  # a child that exits more often than this within RESTART_WINDOW stops up
RESTART_WINDOW = 60.0


def run_all(port: int) -> None:
    data_dir = get_settings().data_dir
    # The children (web, worker, beat) read the same, absolute, directory.
    os.environ["SWITCHYARD_DATA_DIR"] = str(data_dir)
    beside_up.forget(data_dir)  # a killed up's file names services that are gone
    with contextlib.ExitStack() as stack:
        started: dict[str, str] = {}
        if not os.environ.get("DATABASE_URL"):
            click.echo(f"starting embedded PostgreSQL in {data_dir / 'pg'} …")
            started["DATABASE_URL"] = stack.enter_context(embedded_postgres(data_dir))
        if not os.environ.get("BROKER_URL"):
            click.echo("starting embedded Redis …")
            started["BROKER_URL"] = stack.enter_context(embedded_redis(data_dir / "redis"))
        os.environ.update(started)
        if started:  # for `switchyard token create …` and the like, typed beside up
            beside_up.record(data_dir, started)
            stack.callback(beside_up.forget, data_dir)
        if not os.environ.get("SWITCHYARD_SMTP_HOST") and not os.environ.get(
                "SWITCHYARD_RESEND_API_KEY"):
            host, smtp_port = stack.enter_context(embedded_smtp(data_dir / "mail"))
            os.environ.update(SWITCHYARD_SMTP_HOST=host, SWITCHYARD_SMTP_PORT=str(smtp_port))
            click.echo(f"emails are delivered to {data_dir / 'mail'} (no SMTP configured)")
        if not os.environ.get("SWITCHYARD_LOCAL_REPOS"):
            # The coding agent's demo: a repository with a failing test, cloneable by path.
            from tasks.coding.demo import DEMO_TASK, ensure_demo_repo

            demo = ensure_demo_repo(data_dir / "repos")
            os.environ["SWITCHYARD_LOCAL_REPOS"] = str(demo.parent.resolve())
            click.echo(f"coding agent demo: repo_url {demo.resolve()}, task {DEMO_TASK!r}")
        get_settings.cache_clear()
        # Migrated first: the report checks the schema, and a fresh database has none yet.
        _prepare_database()
        _report_machine()
        token = _local_token(data_dir)
        children = _start_children(port)
        stack.callback(_stop_children, children)
        url = f"http://127.0.0.1:{port}/"
        _wait_for_web(url, children["web"])
        click.echo(f"\nSwitchyard is up: {url}")
        click.echo(f"API token (owner 'local'): {token}  (sign in to the UI with it)")
        click.echo("Ctrl-C stops everything.\n")
        _wait(children)


def _report_machine() -> None:
    """doctor's one-line summary, and the fix for each gap: a system this machine cannot
    run is said at start, not discovered when its first job fails."""
    from app.ops.doctor import fixes, run_checks, summary

    checks = run_checks()
    click.echo(summary(checks) + ("" if not fixes(checks) else "  (`switchyard doctor` for "
                                                                "details)"))
    for fix in fixes(checks):
        click.echo(f"  fix: {fix}")


def _prepare_database() -> None:
    from app.ops.migrations import upgrade

    upgrade()


def _local_token(data_dir: Path) -> str:
    """The local owner's token: the one this data dir's up made before, while it works (not
    revoked), else a new one kept for the next start in a file only this user can read.
    Every start used to make another token that never expires, and the browser signed in
    with yesterday's had to sign in again to match the terminal."""
    from app.http.db import session_factory
    from app.http.tokens import create_token, owner_for_token
    from models.db import session_scope

    kept = data_dir / "run" / "local-token"
    with contextlib.suppress(OSError):
        token = kept.read_text().strip()
        if token and owner_for_token(token) is not None:
            return token
    with pg.transaction(), session_scope(session_factory()) as session:
        _, token = create_token(session, "local")
    kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(kept, token + "\n")
    return token


def _start_children(port: int) -> dict[str, subprocess.Popen]:
    commands = {
        "web": web_command("127.0.0.1", port, 64),
        # Jobs on every queue but the sweeps', which a small worker of their own serves: a
        # recovery sweep never waits behind long jobs holding every worker thread.
        "worker": worker_command(None, ",".join(q for q in QUEUES if q != "sweeps"), None),
        "sweeper": worker_command(1, "sweeps", "solo"),
        "beat": beat_command(),
    }
    # Own sessions, so Ctrl-C reaches only us and we stop them in order.
    return {name: subprocess.Popen(cmd, start_new_session=True) for name, cmd in commands.items()}


def _wait_for_web(url: str, web: subprocess.Popen, timeout: float = 60.0) -> None:
    """The address is printed once it answers, so the first click never meets a refusal."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and web.poll() is None:
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)


def _wait(children: dict[str, subprocess.Popen]) -> None:
    stop = {"now": False}

    def on_signal(signum: int, _frame: object) -> None:
        stop["now"] = True

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    exits: dict[str, list[float]] = {}
    while not stop["now"]:
        for name, proc in list(children.items()):
            if proc.poll() is None:
                continue
            # A child that dies (the OOM killer, a kill -9) is started again, as a supervisor
            # would: its jobs are reclaimed by the sweeps, and the rest of up (the web, its
            # open requests and streams) never notices. One that keeps dying stops up.
            now = time.monotonic()
            recent = [t for t in exits.get(name, []) if now - t < RESTART_WINDOW] + [now]
            exits[name] = recent
            if len(recent) > RESTARTS:
                click.echo(f"{name} exited with {proc.returncode}, {len(recent)} times in "
                           f"{RESTART_WINDOW:g} s; stopping", err=True)
                return
            click.echo(f"{name} exited with {proc.returncode}; starting it again", err=True)
            children[name] = subprocess.Popen(proc.args, start_new_session=True)
        time.sleep(0.5)
    click.echo("\nstopping …")


def _stop_children(children: dict[str, subprocess.Popen]) -> None:
    grace = get_settings().shutdown_grace_seconds + 10
    for name in ("web", "beat", "worker", "sweeper"):
        proc = children[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in children.values():
        try:
            proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    sys.stdout.flush()
