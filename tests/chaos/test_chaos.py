"""Chaos: hundreds of jobs while a fault injector attacks every part the engine relies on.

A private stack (its own PostgreSQL, which the injector restarts, and its own
Redis, which it flushes) runs real worker and beat processes, one of them on a
clock 5 s off. While jobs arrive (multi-step canaries, some sleeping durably,
some waiting for children, some failing once; and deploys behind approvals),
the injector, at random, kill -9s workers and the beat, publishes duplicate
wake-ups, flushes the broker and restarts PostgreSQL. When the faults stop,
every job must end completed, and the records must show the promise held
(tests/chaos/invariants.py): nothing lost, no completed step run again, no two
runs of a job at once, attempts that count exactly the injected failures and
crashes, each job's events in order, each effect performed once.

CHAOS_SEED replays a run's choices (the seed is printed); CHAOS_JOBS and
CHAOS_SECONDS size it (defaults: 300 jobs, 60 s of faults).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from psycopg.rows import dict_row

from app.ops.embedded import embedded_redis, scratch_database
from tasks.settings import libpq_url
from tests.chaos import conftest as chaos_conftest
from tests.chaos.invariants import check
from tests.e2e.procs import ROOT, Proc, Procs
from tests.support.fake_providers import FakeProviders, fake_providers  # noqa: F401
from tests.support.private_pg import PrivatePostgres

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

JOBS = int(os.environ.get("CHAOS_JOBS", "300"))
FAULT_SECONDS = float(os.environ.get("CHAOS_SECONDS", "60"))
APPROVALS = 20
WORKERS = 3  # the last one runs under faketime, 5 s ahead
SKEW_SECONDS = 5.0
# Preloaded straight into the worker (the `faketime` command would fork it, and the pid
# we kill and name would be the wrapper's); the MT build suits Celery's thread pool.
FAKETIME_LIB = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))), None)
DRAIN_TIMEOUT = 180.0
HOST = socket.gethostname()


# --- the private stack ---------------------------------------------------------------------

@dataclass
class Stack:
    pg: PrivatePostgres
    broker: str
    database_url: str
    trace_dir: Path

    def env(self) -> dict[str, str]:
        return {"DATABASE_URL": self.database_url, "BROKER_URL": self.broker,
                "SWITCHYARD_STEP_TRACE_DIR": str(self.trace_dir),
                # longer than any restart the injector does, so no outcome is given up
                "SWITCHYARD_DB_RETRY_SECONDS": "30"}

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with psycopg.connect(libpq_url(self.database_url), autocommit=True,
                             row_factory=dict_row, connect_timeout=5) as conn:
            return list(conn.execute(sql, params))


@pytest.fixture
def stack() -> Iterator[Stack]:
    # Not tmp_path: PostgreSQL runs as an unprivileged user and must reach its directory.
    root = Path(tempfile.mkdtemp(prefix="switchyard-chaos-"))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, root, True)
        pg = PrivatePostgres(root)
        cleanup.callback(pg.close)
        pg.start()
        broker = cleanup.enter_context(embedded_redis(root / "redis"))
        url = cleanup.enter_context(scratch_database(pg.url, "switchyard_chaos"))
        yield Stack(pg, broker, url, root / "trace")


class Driver:
    """tests/chaos/driver.py in a process configured for the stack; one request at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self._lock = threading.Lock()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.chaos.driver"], cwd=ROOT,
                                     env={**os.environ, **env}, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def __call__(self, op: str, **req: Any) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": op, **req}) + "\n")
            self.proc.stdin.flush()
            answer = json.loads(self.proc.stdout.readline())
        assert "error" not in answer, answer
        return answer

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


# --- the fault injector ------------------------------------------------------------------

@dataclass
class Chaos:
    rng: random.Random
    stack: Stack
    procs: Procs
    driver: Driver
    project: str
    skewed: bool
    workers: dict[int, Proc] = field(default_factory=dict)
    beat: Proc | None = None
    killed: dict[int, float] = field(default_factory=dict)  # pid -> time.time() of the kill
    skewed_pids: set[int] = field(default_factory=set)
    faults: Counter[str] = field(default_factory=Counter)
    timeline: list[str] = field(default_factory=list)  # what was done when, for a failure
    stop: threading.Event = field(default_factory=threading.Event)
    generation: int = 0

    @property
    def killed_workers(self) -> set[str]:
        return {f"{HOST}:{pid}" for pid in self.killed}

    def start_worker(self, slot: int) -> Proc:
        self.generation += 1
        name = f"w{slot}-{self.generation}"
        env = self.stack.env()
        skewed = self.skewed and slot == WORKERS - 1
        if skewed:
            env.update(LD_PRELOAD=str(FAKETIME_LIB), FAKETIME=f"+{SKEW_SECONDS:g}s")
        proc = self.procs.worker(name, pool="threads", concurrency=4, env=env, ready=False)
        if skewed:
            self.skewed_pids.add(proc.pid)
        self.workers[slot] = proc
        return proc

    def start_beat(self) -> None:
        self.generation += 1
        name = f"beat-{self.generation}"
        self.beat = self.procs._start(name, ["beat", "-s", str(self.procs.tmp / name),
                                             "-l", "INFO"], self.stack.env())

    def kill(self, proc: Proc) -> None:
        proc.kill9()
        self.killed[proc.pid] = time.time()
        self.timeline.append(f"{_clock(self.killed[proc.pid])} killed {proc.name} (pid {proc.pid})")

    # The faults, each one a method; weights say how often the injector picks it.
    def kill_worker(self) -> None:
        slot = self.rng.randrange(WORKERS)
        self.kill(self.workers[slot])
        time.sleep(self.rng.uniform(0.2, 2.0))
        self.start_worker(slot)

    def kill_beat(self) -> None:
        assert self.beat is not None
        self.kill(self.beat)
        time.sleep(self.rng.uniform(0.2, 2.0))
        self.start_beat()

    def duplicate_wakeups(self) -> None:
        rows = self.stack.query("SELECT id::text FROM agent_jobs WHERE project_id = %s "
                                "AND status IN ('queued', 'running', 'waiting')", (self.project,))
        ids = [r["id"] for r in rows]
        if ids:
            self.driver("wake", jobs=self.rng.sample(ids, min(len(ids), 8)))

    def flush_broker(self) -> None:
        redis.Redis.from_url(self.stack.broker).flushdb()

    def restart_postgres(self) -> None:
        self.stack.pg.stop(self.rng.choice(["fast", "immediate"]))
        time.sleep(self.rng.uniform(0.3, 2.0))
        self.stack.pg.start()

    WEIGHTS = {"kill_worker": 4, "kill_beat": 1, "duplicate_wakeups": 3, "flush_broker": 1,
               "restart_postgres": 1}

    def run(self) -> None:
        names, weights = zip(*self.WEIGHTS.items(), strict=True)
        while not self.stop.wait(self.rng.uniform(1.0, 3.0)):
            fault = self.rng.choices(names, weights)[0]
            began = time.time()
            getattr(self, fault)()
            self.faults[fault] += 1
            self.timeline.append(f"{_clock(began)} {fault} ({time.time() - began:.1f} s)")


def _clock(t: float) -> str:
    return f"{time.strftime('%H:%M:%S', time.gmtime(t))}.{int(t % 1 * 1000):03d} UTC"


def canary_payload(rng: random.Random) -> dict[str, Any]:
    payload: dict[str, Any] = {"steps": rng.randint(2, 5),
                               "step_seconds": rng.choice([0.0, 0.1, 0.3, 0.6])}
    kind = rng.random()
    if kind < 0.15:
        payload["sleep_seconds"] = round(rng.uniform(0.5, 3.0), 2)
    elif kind < 0.27:
        payload["children"] = rng.randint(1, 3)
    elif kind < 0.45:
        payload["fail_first_attempts"] = 1
    return payload


def read_journal(directory: Path, skewed_pids: set[int]) -> list[dict[str, Any]]:
    """Every process's step lines, times set back by the skew of the worker that was off."""
    lines: list[dict[str, Any]] = []
    for path in sorted(directory.glob("steps-*.jsonl")):
        for raw in path.read_text().splitlines():
            with contextlib.suppress(json.JSONDecodeError):  # a line cut by kill -9
                line = json.loads(raw)
                if line["pid"] in skewed_pids:
                    line["t"] -= SKEW_SECONDS
                lines.append(line)
    return lines


# --- the run -----------------------------------------------------------------------------

def test_chaos(stack: Stack, fake_providers: FakeProviders,  # noqa: F811
               tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(2**32))
    print(f"\nchaos seed {seed} (CHAOS_SEED={seed} replays its choices)")
    # Two streams, so the plan of jobs and the order of faults each replay from the seed
    # (the timing between them cannot: that is the point of running many seeds).
    rng, fault_rng = random.Random(seed), random.Random(seed + 1)
    skewed = FAKETIME_LIB is not None
    if not skewed:
        assert os.environ.get("CI") != "true", "CI runs a skewed worker (.ci/run installs faketime)"
        print("chaos: faketime is not installed; no worker runs on a skewed clock")
    fake_providers.delay = 0.2  # a kill can land while a deploy is in flight

    procs = Procs(tmp_path)
    driver = Driver(stack.env())
    started = time.monotonic()
    try:
        ids = driver("setup")
        chaos = Chaos(fault_rng, stack, procs, driver, ids["project"], skewed)
        for slot in range(WORKERS):
            chaos.start_worker(slot)
        chaos.start_beat()
        procs.wait(lambda: len(stack.query("SELECT 1 FROM worker_heartbeats WHERE "
                                           "stopped_at IS NULL")) >= WORKERS,
                   60, "the chaos workers up")

        injector = threading.Thread(target=chaos.run, name="chaos-injector", daemon=True)
        injector.start()
        submitted, approvals = _submit(rng, driver, ids, fake_providers.url)
        # Faults go on for the rest of the window, then stop; the stack is left whole.
        chaos.stop.wait(max(0.0, FAULT_SECONDS - (time.monotonic() - started)))
        chaos.stop.set()
        injector.join(60)
        assert not injector.is_alive(), "the injector is stuck"
        print(f"chaos: faults {dict(chaos.faults)}")

        def drained() -> bool:
            rows = stack.query("SELECT count(*) AS n FROM agent_jobs WHERE project_id = %s "
                               "AND status NOT IN ('completed', 'failed', 'canceled')",
                               (ids["project"],))
            return rows[0]["n"] == 0

        procs.wait(drained, DRAIN_TIMEOUT, "every chaos job to end")
        time.sleep(1.0)  # room for a (wrong) second run or request to show itself
        verdict, jobs = _verdict(stack, chaos, submitted, approvals, fake_providers)
    finally:
        driver.close()
        procs.close()
    took = time.monotonic() - started
    faults = sum(chaos.faults.values())
    line = (f"chaos: {len(jobs)} jobs, {faults} faults, {len(verdict.lost)} lost, "
            f"{len(verdict.run_twice)} run twice, {len(verdict.overlapping)} overlapping")
    chaos_conftest.LINES.append(f"{line} (seed {seed}, {took:.0f} s)")
    print(line)
    assert verdict.ok(), (f"seed {seed}:\n{verdict.report()}\nfaults:\n"
                          + "\n".join(chaos.timeline) + f"\n{procs.report(30)}")
    assert len(jobs) >= JOBS and faults > 0


def _submit(rng: random.Random, driver: Driver, ids: dict[str, str],
            hook_base: str) -> tuple[list[str], list[str]]:
    """Canaries (and every JOBS/APPROVALS-th time an approved deploy) spread over the window."""
    spread = FAULT_SECONDS * 0.75 / JOBS
    submitted, approvals = [], []
    every = max(1, JOBS // APPROVALS)
    for n in range(JOBS):
        answer = driver("submit", project=ids["project"], key=f"chaos-{n}",
                        payload=canary_payload(rng))
        submitted.append(answer["job"])
        if n % every == 0 and len(approvals) < APPROVALS:
            got = driver("approve", project=ids["project"], owner=ids["owner"],
                         title=f"deploy {len(approvals)}",
                         url=f"{hook_base}/deploy/chaos-{len(approvals)}")
            approvals.append(got["approval"])
            submitted.append(got["job"])
        time.sleep(rng.uniform(0, 2 * spread))
    return submitted, approvals


def _verdict(stack: Stack, chaos: Chaos, submitted: list[str], approvals: list[str],
             fake: FakeProviders) -> tuple[Any, dict[str, dict[str, Any]]]:
    project = chaos.project
    jobs = {r["id"]: r for r in stack.query(
        "SELECT id::text, status, attempts, payload, last_error FROM agent_jobs "
        "WHERE project_id = %s", (project,))}
    events = stack.query("SELECT id, job_id::text, type, data FROM agent_job_events "
                         "WHERE project_id = %s AND job_id IS NOT NULL ORDER BY id", (project,))
    ledger = {r["idempotency_key"]: r["status"] for r in stack.query(
        "SELECT idempotency_key, status FROM action_executions WHERE project_id = %s",
        (project,))}
    effects = {}
    for n, approval in enumerate(approvals):
        key = f"approval:{approval}"
        effects[key] = {"posts": len(fake.posts(f"/deploy/chaos-{n}")),
                        "status": ledger.get(key)}
    verdict = check(submitted=submitted, jobs=jobs, events=events,
                    journal=read_journal(stack.trace_dir, chaos.skewed_pids), killed=chaos.killed,
                    killed_workers=chaos.killed_workers, effects=effects)
    return verdict, jobs
