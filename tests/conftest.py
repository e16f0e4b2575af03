"""Shared fixtures: real PostgreSQL, real Redis, a real Celery worker in a thread.

Services come from DATABASE_URL / BROKER_URL when set (CI points them at the
machine's servers) and are started embedded otherwise. The environment is
settled in pytest_configure, before any Switchyard module reads its settings;
a run of tests/unit alone starts no service (they do no I/O), and a fixture
that needs one (`db`, `worker`) starts them then.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest_plugins = ("celery.contrib.pytest",)

_services = None
FAST_TIMINGS = {
    "SWITCHYARD_HEARTBEAT_SECONDS": "0.5",
    "SWITCHYARD_STALE_AFTER_SECONDS": "3",
    "SWITCHYARD_SWEEP_SECONDS": "1",
    "SWITCHYARD_SHUTDOWN_GRACE_SECONDS": "2",
    "SWITCHYARD_REDISPATCH_AFTER_SECONDS": "5",
    # Long enough for a connection cut or a quick restart; short enough that a worker
    # thread still running when the session drops its database gives up soon.
    "SWITCHYARD_DB_RETRY_SECONDS": "15",
    # Every project is due for its daily schedules at any hour (local hour >= 0): a test
    # that fires them runs them whatever the time of day (test_schedules_local_time moves it).
    "SWITCHYARD_DAILY_HOUR": "0",
}


UNIT = Path(__file__).resolve().parent / "unit"
_tmp: Path | None = None


def _only_unit_tests(config: pytest.Config) -> bool:
    """Whether every path the run was given is under tests/unit."""
    here = config.invocation_params.dir
    paths = [(here / arg.split("::")[0]).resolve() for arg in config.args]
    return bool(paths) and all(p == UNIT or UNIT in p.parents for p in paths)


def start_services() -> None:
    """The session's PostgreSQL database and Redis, once; their URLs into the environment."""
    global _services
    if _services is not None:
        return
    from tasks.settings import get_settings
    from tests.support import services

    assert _tmp is not None
    _services = services.start(_tmp)
    os.environ["SWITCHYARD_TEST_ADMIN_URL"] = _services.admin_url
    os.environ["DATABASE_URL"] = _services.database_url
    os.environ["BROKER_URL"] = _services.broker_url
    get_settings.cache_clear()


def pytest_configure(config: pytest.Config) -> None:
    global _tmp
    _tmp = Path(tempfile.mkdtemp(prefix="switchyard-tests-"))
    # The coding agent's sandboxed commands run as an unprivileged user inside the data dir's
    # workspaces: it must be able to pass through (not list) the directories above them.
    _tmp.chmod(0o711)
    if not _only_unit_tests(config):
        start_services()  # before collection imports the modules that read settings
    os.environ["SWITCHYARD_DATA_DIR"] = str(_tmp / "data")
    for key, value in FAST_TIMINGS.items():
        os.environ.setdefault(key, value)
    # The fake providers listen on loopback, which the egress guard refuses by default.
    os.environ.setdefault("SWITCHYARD_EGRESS_ALLOW", "127.0.0.1")
    # Every test client is 127.0.0.1 and many tests send wrong tokens on purpose: the tests
    # of the per-address failure limit use a tight limiter of their own.
    os.environ.setdefault("SWITCHYARD_AUTH_FAILURES_BURST", "100000")
    from tasks.settings import get_settings

    get_settings.cache_clear()
    import tasks.catalog  # noqa: F401 - registers every job type, as the worker and web do
    import tests.support.jobtypes  # noqa: F401 - registers the test-only job types


def pytest_unconfigure(config: pytest.Config) -> None:
    from tasks.engine import lifecycle

    lifecycle.stop_heartbeat()
    if "app.streams.hub" in sys.modules:
        # A test's stream started the web's event hub, still polling: ended before the
        # session's database is dropped, or the drop's FORCE ends its connection and its
        # "lost its connection" traceback, printed after the summary, reads like a failure.
        sys.modules["app.streams.hub"].hub.stop()
    if _services is not None:
        _services.stack.close()


# agent_jobs first: the engine's statements lock it before the event log's day partitions.
TABLES = ("agent_jobs, agent_job_events, job_steps, sweep_runs, worker_heartbeats, "
          "api_tokens, projects, owners, agent_memory, chat_messages, packets, approvals, "
          "action_executions, email_jobs, llm_usage, ended_web_sessions, artifacts, workflows, "
          "plans, plan_versions, plan_tasks, plan_task_deps, "
          "functions, function_data")


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """`settings_env(NAME="value", ...)`: these SWITCHYARD_* variables for this test, read
    into the settings at once (get_settings is cached), and the settings read afresh after."""
    from tasks.settings import get_settings

    def set_env(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    yield set_env
    monkeypatch.undo()
    get_settings.cache_clear()


def _end_leftover_sessions() -> None:
    """A job of an earlier test still running on the session's worker (the tests before may
    have enqueued any job type) can hold a lock the TRUNCATE needs, for up to the statement
    timeout (CI once waited out all 60 s of it). Its test is over: say what it was doing
    and end its session; its job meets a lost connection, as after a database restart."""
    from tasks.engine import pg

    rows = pg.fetch_dicts(
        "SELECT pid, state, now() - xact_start AS age, left(query, 200) AS query "
        "FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL "
        "AND xact_start < now() - interval '1 second'")
    for row in rows:
        warnings.warn(f"ending a leftover session that blocked the tables' TRUNCATE: {row}",
                      stacklevel=2)
        pg.execute("SELECT pg_terminate_backend(%s)", (row["pid"],))


@pytest.fixture
def db() -> Iterator[None]:
    """An empty database (but for the system project) and an empty broker."""
    start_services()
    import psycopg

    from tasks.engine import pg
    from tests.support import broker

    for attempt in range(5):
        try:
            with pg.transaction() as conn:
                # The thread's connection may be the web's (a 5 s statement timeout): wait
                # for the lock only, and never longer than 5 s.
                conn.execute("SET LOCAL statement_timeout = 0")
                conn.execute("SET LOCAL lock_timeout = '5s'")
                conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
            break
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable):
            if attempt == 4:
                raise
            _end_leftover_sessions()
    pg.execute("INSERT INTO projects (id, owner_id, name, phase) VALUES "
               "('00000000-0000-0000-0000-000000000000', NULL, 'system', 'system')")
    broker.wipe()
    yield


@pytest.fixture
def owner_and_project(db: None) -> tuple[str, str]:
    from tasks.engine import pg

    owner, project = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, f"owner-{owner[:8]}"))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'test project')",
               (project, owner))
    return owner, project


@pytest.fixture
def project(owner_and_project: tuple[str, str]) -> str:
    return owner_and_project[1]


@pytest.fixture(scope="session")
def worker() -> Iterator[object]:
    """A real Celery worker (threads pool) consuming every queue, in this process."""
    start_services()
    from celery.contrib.testing.worker import start_worker

    from tasks.celery_app import app
    from tasks.engine.queues import QUEUES

    global in_process_worker
    app.conf.worker_prefetch_multiplier = 1
    try:
        # 30 s to stop: its consumer may be in the middle of a broker reconnect's backoff
        # (a RabbitMQ pass ended once with the worker thread still alive after 10 s).
        with start_worker(app, pool="threads", concurrency=4, perform_ping_check=False,
                          loglevel="WARNING", shutdown_timeout=30, queues=list(QUEUES)) as w:
            in_process_worker = w
            yield w
    except RuntimeError:
        # Still alive: say where every thread is, so the cause can be found from CI's log.
        import faulthandler
        import sys

        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        raise
    finally:
        in_process_worker = None


in_process_worker = None  # the session `worker`, once a test has started it


@contextlib.contextmanager
def in_process_worker_paused() -> Iterator[None]:
    """Stop the session worker consuming (for tests whose own processes must get every job)."""
    from tasks.celery_app import app
    from tasks.engine.queues import QUEUES

    w = in_process_worker
    if w is None:
        yield
        return
    # Through the worker's remote control, so its own consumer thread does it: an AMQP
    # connection (py-amqp) breaks when a second thread sends on it mid-read. The command only
    # schedules the change (call_soon), so wait until the worker reports it done.
    def control(command: str) -> None:
        for queue in QUEUES:
            replies = app.control.broadcast(command, arguments={"queue": queue}, reply=True,
                                            destination=[w.hostname], timeout=10)
            assert replies, f"the session worker did not answer {command}({queue})"
        wanted = set(QUEUES) if command == "add_consumer" else set()

        def consuming() -> set[str]:
            answer = app.control.inspect(destination=[w.hostname], timeout=5).active_queues()
            return {q["name"] for q in (answer or {}).get(w.hostname, [])} & set(QUEUES)
        wait_until(lambda: consuming() == wanted, what=f"the session worker's {command}")

    control("cancel_consumer")
    try:
        yield
    finally:
        control("add_consumer")


def wait_until(predicate: Callable[[], object], timeout: float = 15.0,
               interval: float = 0.05, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
