"""Durable canary vs raw Celery, same broker, same database, same machine, one run.

    python bench/throughput.py [--jobs 5000] [--rounds 3] [--paced-seconds 10]
                               [--by-hand] [--dbos CONCURRENCY] [--owners N] [--history JOBS]

Services come from DATABASE_URL / BROKER_URL, or are started embedded. Both sides
run on 2 `-P solo` worker processes with prefetch 64 (the best configuration of
each on a 2-core machine: prefork's master hand-off costs more than these tasks)
and a producer that reuses its broker connection (Celery's producer pool) and,
for the engine, one persistent database connection. Rounds alternate raw and
durable so drift in the shared machine hits both. Prints jobs/s, steps/s, the
ratio, enqueue p50/p99 and publish-to-start p50/p99 at 50 jobs/s.

Two more sides, for an engineer choosing between these: `--by-hand`, Celery with each step
committed to PostgreSQL by the task itself (the least a Celery user who records steps
writes), and `--dbos N`, the same job as a DBOS Transact workflow (a durable-execution
library on PostgreSQL: bench/dbos_side.py) on as many worker processes as the durable
side, N workflows at once in each. Their rounds alternate with the others'.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKERS = 2
STEPS = 3


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text} is not at least 1")
    return n


def setup_services(stack: contextlib.ExitStack) -> None:

    from app.ops.embedded import embedded_postgres, embedded_redis, scratch_database

    tmp = Path(tempfile.mkdtemp(prefix="switchyard-bench-"))
    admin = os.environ.get("DATABASE_URL") or stack.enter_context(embedded_postgres(tmp))
    broker = os.environ.get("BROKER_URL") or stack.enter_context(embedded_redis(tmp / "redis"))
    url = stack.enter_context(scratch_database(admin, "switchyard_bench"))
    os.environ.update({"DATABASE_URL": url, "BROKER_URL": broker,
                       "SWITCHYARD_PREFETCH_MULTIPLIER": "64", "SWITCHYARD_WORKER_POOL": "solo",
                       "SWITCHYARD_LOG_LEVEL": "WARNING"})


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to all at once (they stop in parallel), then a kill for any still up after 20 s."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()


def start_workers(stack: contextlib.ExitStack, logdir: Path, raw_workers: int = WORKERS,
                  durable_workers: int = WORKERS, threads: int = 0) -> None:
    """`threads` > 0: the durable workers run a threads pool of that many threads with
    `switchyard worker`'s prefetch (4 a thread) instead of solo with prefetch 64."""
    pool = (["-P", "threads", "-c", str(threads), "--prefetch-multiplier", "4"] if threads
            else ["-P", "solo", "--prefetch-multiplier", "64"])
    common = ["--without-gossip", "--without-mingle", "--without-heartbeat", *pool,
              "--loglevel", "WARNING"]
    commands = [[sys.executable, "-m", "celery", "-A", "bench.raw_app", "worker",
                 "-Q", "bench_raw", *common]] * raw_workers
    commands += [[sys.executable, "-m", "celery", "-A", "tasks.celery_app", "worker",
                  "-Q", "default", *common]] * durable_workers
    procs = []
    for n, cmd in enumerate(commands):
        log = open(logdir / f"worker-{n}.log", "w")  # noqa: SIM115 - closed with the stack
        stack.callback(log.close)
        procs.append(subprocess.Popen([*cmd, "-n", f"bench{n}@%h"], cwd=ROOT, stdout=log,
                                      stderr=subprocess.STDOUT))

    stack.callback(stop_all, procs)
    time.sleep(4)  # workers connect and start consuming


class Raw:
    name = "raw celery no-op"

    def __init__(self) -> None:
        import redis

        from bench.raw_app import RESULTS, noop

        self.task, self.key = noop, RESULTS
        self.redis = redis.Redis.from_url(os.environ["BROKER_URL"])
        self.published: dict[int, float] = {}
        self.seq = 0

    def reset(self) -> None:
        self.redis.delete(self.key)
        self.published.clear()

    def submit(self) -> float:
        i, self.seq = self.seq, self.seq + 1
        self.task.apply_async((i,), queue="bench_raw")
        self.published[i] = time.time()
        return self.published[i]

    def done(self) -> int:
        return int(self.redis.llen(self.key))

    def start_delays(self) -> list[float]:
        out = []
        for item in self.redis.lrange(self.key, 0, -1):
            i, started = item.split()
            out.append(float(started) - self.published[int(i)])
        return out


class ByHand(Raw):
    """Celery with each step committed to PostgreSQL by hand (bench.raw_app.steps_by_hand)."""

    name = f"celery + a commit a step ({STEPS})"

    def __init__(self) -> None:
        super().__init__()
        from bench.raw_app import BY_HAND_TABLE, RESULTS_BY_HAND, steps_by_hand
        from tasks.engine import pg

        pg.execute(BY_HAND_TABLE)
        self.task, self.key = steps_by_hand, RESULTS_BY_HAND

    def submit(self) -> float:
        i, self.seq = self.seq, self.seq + 1
        self.task.apply_async((i, STEPS), queue="bench_raw")
        self.published[i] = time.time()
        return self.published[i]


class Durable:
    name = f"durable system.canary ({STEPS} steps)"

    def __init__(self) -> None:
        import tasks.catalog  # noqa: F401 - registers every job type
        from tasks.engine import pg
        from tasks.engine.enqueue import EnqueueRequest, enqueue

        self.pg, self.enqueue, self.request = pg, enqueue, EnqueueRequest
        self.projects: list[str] = []
        self.submitted = 0
        self.published: dict[str, float] = {}

    owners = 1  # --owners: the round's jobs go round-robin to this many owners' projects

    def reset(self) -> None:
        self.projects = [str(uuid.uuid4()) for _ in range(self.owners)]
        for project in self.projects:
            owner = str(uuid.uuid4())
            self.pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, owner))
            self.pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'bench')",
                            (project, owner))
        self.published.clear()

    batch = 1  # --batch: the producer enqueues this many per statement (enqueue_many)
    _pending: list = []

    def submit(self) -> float:
        self.submitted += 1
        req = self.request(project_id=self.projects[self.submitted % len(self.projects)],
                           job_type="system.canary", payload={"steps": STEPS})
        if self.batch > 1:
            self._pending.append(req)
            if len(self._pending) >= self.batch:
                self.flush()
            return time.time()
        job = self.enqueue(req)
        self.published[str(job.job_id)] = time.time()
        return self.published[str(job.job_id)]

    def flush(self) -> None:
        from tasks.engine.enqueue import enqueue_many

        reqs, self._pending = self._pending, []
        if reqs:
            at = time.time()
            for job in enqueue_many(reqs):
                self.published[str(job.job_id)] = at  # type: ignore[union-attr]

    def done(self) -> int:
        # Through the project's index: a filter on status would let the planner take the
        # status index and count every completed job of every earlier round, 50 times a
        # second (the benchmark's own polling then slowed each round more than the last).
        return int(self.pg.fetch_value(
            "SELECT count(*) FILTER (WHERE status = 'completed') FROM agent_jobs "
            "WHERE project_id = ANY(%s::uuid[])", (self.projects,)))

    def start_delays(self) -> list[float]:
        rows = self.pg.fetch_dicts("SELECT id, extract(epoch FROM locked_at) AS at FROM agent_jobs "
                                   "WHERE project_id = ANY(%s::uuid[])", (self.projects,))
        return [float(r["at"]) - self.published[str(r["id"])] for r in rows]

    def verify(self, n: int) -> None:
        found = self.pg.fetch_one_dict(
            "SELECT count(*) FILTER (WHERE s.status = 'completed') AS steps, "
            "count(DISTINCT j.id) AS jobs "
            "FROM agent_jobs j JOIN job_steps s ON s.job_id = j.id "
            "WHERE j.project_id = ANY(%s::uuid[])", (self.projects,))
        row = (found["steps"], found["jobs"]) if found else None
        assert row == (n * STEPS, n), f"expected {n * STEPS} durable steps of {n} jobs, got {row}"


DBOS_VERSION = "3.4.0"


def dbos_python() -> Path:
    """A virtualenv of its own holding DBOS Transact (made once, kept in the user's cache),
    so its pins never meet Switchyard's."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "switchyard-bench" / f"dbos-{DBOS_VERSION}"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making {venv} (pip install dbos=={DBOS_VERSION})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"dbos=={DBOS_VERSION}"],
                       check=True)
    return python


class Dbos:
    """The same 3 checkpointed no-op steps as a DBOS Transact workflow on a DBOS queue,
    served by worker processes of their own (bench/dbos_side.py), in the same database.

    Its workers run only during its own rounds: a DBOS executor polls its queue every
    10 ms whether or not there is work, and left running it took CPU from the other sides
    (a first try had the durable canary at 94 jobs/s and the load at 9.9)."""

    name = f"dbos workflow ({STEPS} steps)"

    def __init__(self, logdir: Path, workers: int, concurrency: int) -> None:
        self.python, self.url, self.round = dbos_python(), os.environ["DATABASE_URL"], 0
        self.logdir, self.workers, self.concurrency = logdir, workers, concurrency

    def _script(self, *args: str) -> list[str]:
        return [str(self.python), str(ROOT / "bench" / "dbos_side.py"), *args]

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        procs: list[subprocess.Popen] = []
        try:
            for n in range(self.workers):  # one at a time: the first launch makes the schema
                with open(self.logdir / f"dbos-{self.round}-{n}.log", "w") as log:
                    proc = subprocess.Popen(self._script("worker", self.url, str(self.concurrency)),
                                            stdout=subprocess.PIPE, stderr=log, text=True)
                procs.append(proc)
                lines = iter(proc.stdout.readline, "") if proc.stdout else iter(())
                if not any(line.strip() == "ready" for line in lines):
                    raise RuntimeError(f"a DBOS worker did not start; see {self.logdir}")
            yield
        finally:
            stop_all(procs)

    def run_burst(self, n: int) -> float:
        """Its own process enqueues through DBOSClient and waits (DBOS is not importable
        here); the rate covers the same span as the other sides' (first enqueue to last
        job done). The workers' and the client's start are outside it."""
        self.round += 1
        with self.serving():
            out = subprocess.run(self._script("burst", self.url, str(n),
                                              f"{os.getpid()}-{self.round}"),
                                 check=True, capture_output=True, text=True, timeout=3600)
        return float(out.stdout.split()[-1])


def burst(side, n: int) -> tuple[float, list[float]]:
    """Submit n as fast as possible; return (jobs/s end to end, enqueue latencies)."""
    if isinstance(side, Dbos):
        return side.run_burst(n), []
    side.reset()
    latencies = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        side.submit()
        latencies.append(time.perf_counter() - s)
    if hasattr(side, "flush"):
        side.flush()
    while side.done() < n:
        time.sleep(0.1)  # the durable side's count reads the round's rows: poll gently
    elapsed = time.perf_counter() - t0
    if hasattr(side, "verify"):
        side.verify(n)
    return n / elapsed, latencies


def paced(side, rate: float, seconds: float) -> tuple[list[float], list[float]]:
    """Submit at `rate`/s; return (enqueue latencies, publish-to-start delays)."""
    side.reset()
    n = int(rate * seconds)
    latencies = []
    start = time.perf_counter()
    for i in range(n):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        s = time.perf_counter()
        side.submit()
        latencies.append(time.perf_counter() - s)
    while side.done() < n:
        time.sleep(0.05)
    return latencies, side.start_delays()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--paced-seconds", type=float, default=10.0)
    parser.add_argument("--raw-workers", type=int, default=WORKERS)
    parser.add_argument("--durable-workers", type=int, default=WORKERS)
    parser.add_argument("--batch", type=int, default=1,
                        help="durable producer: jobs per enqueue_many statement (1: enqueue)")
    parser.add_argument("--owners", type=positive, default=1,
                        help="durable side: spread each round's jobs over this many owners "
                             "(each its own fair share)")
    parser.add_argument("--history", type=int, default=0, metavar="JOBS",
                        help="first fill the tables with this many finished 3-step jobs of "
                             "another project (bench/history.py)")
    parser.add_argument("--by-hand", action="store_true",
                        help="a third side on the raw workers: each step committed to "
                             "PostgreSQL by hand (the durable minimum, without the engine)")
    parser.add_argument("--dbos", type=int, default=0, metavar="CONCURRENCY",
                        help="a fourth side: the same job as a DBOS Transact workflow, on as "
                             "many DBOS worker processes as the durable side, each running "
                             "up to CONCURRENCY workflows at once (pip installs dbos into a "
                             "virtualenv of its own in ~/.cache the first time)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        setup_services(stack)
        logdir = Path(tempfile.mkdtemp(prefix="switchyard-bench-logs-"))
        start_workers(stack, logdir, args.raw_workers, args.durable_workers)
        raw, durable = Raw(), Durable()
        durable.batch, durable.owners = args.batch, args.owners
        if args.history:
            from bench.history import History

            History(durable.pg).grow(args.history)
        sides = [raw, durable, *([ByHand()] if args.by_hand else []),
                 *([Dbos(logdir, args.durable_workers, args.dbos)] if args.dbos else [])]
        for side in sides:
            burst(side, 200)  # warm up connections and prepared statements
        rates: dict[str, list[float]] = {side.name: [] for side in sides}
        enq: dict[str, list[float]] = {side.name: [] for side in sides}
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else reversed(sides):
                rate, lat = burst(side, args.jobs)
                rates[side.name].append(rate)
                enq[side.name] += lat
                print(f"round {r + 1}: {side.name:<32} {rate:7.0f} jobs/s", flush=True)
        report(raw, durable, rates, enq, args)
        ours = statistics.median(rates[durable.name])
        for side in sides[2:]:
            theirs = statistics.median(rates[side.name])
            print(f"{side.name}: {theirs:7.0f} jobs/s; ratio durable canary/{side.name}: "
                  f"{ours / theirs:.2f}")


def report(raw, durable, rates, enq, args) -> None:
    raw_rate = statistics.median(rates[raw.name])
    dur_rate = statistics.median(rates[durable.name])
    print(f"\n{args.jobs} jobs per side, {args.rounds} alternating rounds, medians; workers: "
          f"raw {args.raw_workers}, durable {args.durable_workers} x celery -P solo "
          "--prefetch-multiplier 64")
    print(f"raw celery no-op:      {raw_rate:7.0f} jobs/s")
    print(f"durable canary:        {dur_rate:7.0f} jobs/s  {dur_rate * STEPS:7.0f} steps/s "
          f"(every step and event committed)")
    for side in (raw, durable):
        lat = enq[side.name]
        print(f"enqueue latency, burst, {side.name:<32} p50 {pct(lat, 50) * 1e3:6.2f} ms  "
              f"p99 {pct(lat, 99) * 1e3:6.2f} ms")
    producer = (f"enqueue_many, {args.batch} jobs a statement" if args.batch > 1
                else "enqueue, one job a statement")
    places = os.environ.get("SWITCHYARD_OWNER_MAX_ACTIVE", "16")
    print(f"producer: {producer}; fair share: {places} places per owner (0: off), "
          f"{args.owners} owner(s); {args.history:,} jobs of history; "
          f"load {os.getloadavg()[0]:.2f}")
    durable.batch = 1  # the paced runs enqueue one job at a time
    for side in (raw, durable):
        lat, delays = paced(side, args.rate, args.paced_seconds)
        print(f"at {args.rate:.0f} jobs/s, {side.name:<32} enqueue p50 {pct(lat, 50) * 1e3:6.2f} "
              f"ms p99 {pct(lat, 99) * 1e3:6.2f} ms; publish-to-start p50 "
              f"{pct(delays, 50) * 1e3:6.2f} ms p99 {pct(delays, 99) * 1e3:6.2f} ms")
    print(f"ratio durable/raw: {dur_rate / raw_rate:.2f}")


if __name__ == "__main__":
    main()
