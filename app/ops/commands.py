"""The command lines of Switchyard's processes: `switchyard web|worker|beat` exec them and
`switchyard up` starts them side by side."""

from __future__ import annotations

import secrets
import sys

from tasks.settings import get_settings

# gunicorn's gthread, with a bound on receiving each request (app.ops.receive_deadline).
WORKER_CLASS = "app.ops.receive_deadline.ThreadWorker"


def web_command(host: str, port: int, threads: int, workers: int = 1) -> list[str]:
    # One process by default: its event hub serves every stream. More processes take more
    # enqueues per second (issue 26: bench/http_latency.py --web-workers), each with its hub.
    return [sys.executable, "-m", "gunicorn", "-c", "python:app.ops.gunicorn_conf",
            "-k", WORKER_CLASS, "-w", str(workers), "--threads", str(threads),
            "-b", f"{host}:{port}",
            "--timeout", "60", "--graceful-timeout", "10", "app.web:create_app()"]


def worker_command(concurrency: int | None, queues: str | None, pool: str | None,
                   name: str | None = None) -> list[str]:
    # Pool and concurrency always go on the command line: Celery cannot tell an explicit
    # `-P prefork` from its default, so a configured pool would silently win.
    settings = get_settings()
    cmd = [sys.executable, "-m", "celery", "-A", "tasks.celery_app", "worker",
           "--loglevel", settings.log_level, "--pool", pool or settings.worker_pool,
           "--concurrency", str(concurrency or settings.worker_concurrency),
           "--hostname", name or default_node_name(queues)]
    if queues:
        cmd += ["--queues", queues]
    return cmd


def default_node_name(queues: str | None) -> str:
    """A node name of its own for each worker process. Celery's default, celery@<host>, is
    the same for every worker on a host: on RabbitMQ only one of them can hold the node's
    exclusive remote-control queue, and the Procfile's worker and sweeper (or up's) killed
    each other at start (RESOURCE_LOCKED)."""
    role = "sweeper" if queues == "sweeps" else "worker"
    return f"{role}-{secrets.token_hex(3)}@%h"


def beat_command() -> list[str]:
    schedule = get_settings().data_dir / "celerybeat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-m", "celery", "-A", "tasks.celery_app", "beat",
            "--loglevel", get_settings().log_level, "--schedule", str(schedule)]
