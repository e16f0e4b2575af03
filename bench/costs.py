"""What one durable job costs: CPU per process class, commits, rows, events and WAL bytes.

    python bench/costs.py [--jobs 2000] [--steps 3] [--workers 2] [--threads N]
                          [--claim-ahead N] [--owners N]

Runs `--jobs` canaries of `--steps` steps through real workers (`celery -P solo`,
prefetch 64, as bench/throughput.py) after a warm-up, and divides what moved by the
number of jobs (`--owners N`: spread round-robin over N owners, each with its own fair
share, as bench/throughput.py --owners):

- CPU per job of the producer (this process: enqueue), the workers, PostgreSQL (every
  `postgres` process: backends, WAL writer, checkpointer) and Redis, from /proc;
- commits (autocommit: one per statement), rows inserted/updated/deleted and HOT
  updates of the scratch database (pg_stat_database / pg_stat_user_tables);
- event rows per job, and WAL bytes per job (pg_current_wal_lsn before and after).

Services come from DATABASE_URL / BROKER_URL, or are started embedded. Compare
figures only within one machine and load: the load and steal are printed with them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.throughput import Durable, burst, positive, setup_services, start_workers  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
STATS_SETTLE = 11.0


def cpu_of(pids: list[int]) -> float:
    """Seconds of CPU (user + system, children reaped included) of these processes."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / TICK
    return total


def pids_named(name: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == name:
                    out.append(int(entry.name))
    return out


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == pid:
                    out.append(int(entry.name))
    return out


def process_classes(workers: list[int]) -> dict[str, Callable[[], list[int]]]:
    """Each class's processes, listed again at each snapshot: a threads worker's pool threads
    open their own connections (new backends) after the start; a backend that exits is
    counted in its parent's cutime."""
    return {"worker": lambda: workers, "postgres": lambda: pids_named("postgres"),
            "redis": lambda: pids_named("redis-server")}


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_and_steal() -> str:
    """The 1-minute load and the CPU stolen since boot and over the last second."""
    def steal() -> tuple[int, int]:
        parts = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return parts[7], sum(parts)
    s0, t0 = steal()
    time.sleep(1)
    s1, t1 = steal()
    load = os.getloadavg()[0]
    return f"load {load:.2f}, steal {100 * (s1 - s0) / max(1, t1 - t0):.0f}% (last second)"


DB_STATS = """
SELECT d.xact_commit AS commits, d.tup_inserted AS inserted, d.tup_updated AS updated,
    d.tup_deleted AS deleted,
    (SELECT COALESCE(sum(n_tup_hot_upd), 0) FROM pg_stat_user_tables) AS hot,
    pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS wal
FROM pg_stat_database d WHERE d.datname = current_database()
"""


def measure(durable: Durable, jobs: int,
            classes: dict[str, Callable[[], list[int]]]) -> dict[str, float]:
    pg = durable.pg

    def snapshot() -> dict[str, float]:
        pg.execute("SELECT pg_stat_clear_snapshot()")
        stats = {k: float(v) for k, v in (pg.fetch_one_dict(DB_STATS) or {}).items()}
        stats |= {f"cpu {k}": cpu_of(pids()) for k, pids in classes.items()}
        stats["cpu producer"] = own_cpu()
        return stats

    # A busy backend flushes its statistics to pg_stat_database about every second, an idle
    # one only after 10 s (PostgreSQL 15's PGSTAT_IDLE_INTERVAL): wait that out both sides.
    time.sleep(STATS_SETTLE)
    before = snapshot()
    events_before = pg.fetch_value("SELECT count(*) FROM agent_job_events")
    rate, _ = burst(durable, jobs)
    time.sleep(STATS_SETTLE)
    after = snapshot()
    moved = {k: (after[k] - before[k]) / jobs for k in after}
    moved["events"] = (pg.fetch_value("SELECT count(*) FROM agent_job_events")
                       - events_before) / jobs
    moved["jobs/s"] = rate
    return moved


def report(moved: dict[str, float], args: argparse.Namespace, load: str) -> None:
    pool = (f"-P threads -c {args.threads} --prefetch-multiplier 4" if args.threads
            else "-P solo --prefetch-multiplier 64")
    ahead = os.environ.get("SWITCHYARD_CLAIM_AHEAD", "default")
    print(f"{args.jobs} canaries of {args.steps} steps, {args.workers} x celery {pool}, "
          f"claim ahead {ahead}, {args.owners} owner(s); {load}")
    cpu = {k[4:]: v for k, v in moved.items() if k.startswith("cpu ")}
    print("CPU per job (ms): " + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in cpu.items())
          + f", total {sum(cpu.values()) * 1e3:.2f}")
    print(f"per job: {moved['commits']:.1f} commits (statements), {moved['inserted']:.1f} rows "
          f"inserted, {moved['updated']:.1f} updated ({moved['hot']:.1f} HOT), "
          f"{moved['deleted']:.1f} deleted, {moved['events']:.1f} event rows, "
          f"{moved['wal']:.0f} WAL bytes; {moved['jobs/s']:.0f} jobs/s end to end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0,
                        help="run each worker with a threads pool of this many threads "
                             "(`switchyard worker`'s pool) instead of solo")
    parser.add_argument("--claim-ahead", type=int, default=None,
                        help="SWITCHYARD_CLAIM_AHEAD for the workers (0: off)")
    parser.add_argument("--owners", type=positive, default=1,
                        help="spread the jobs over this many owners (each its own fair share)")
    args = parser.parse_args()
    if args.claim_ahead is not None:
        os.environ["SWITCHYARD_CLAIM_AHEAD"] = str(args.claim_ahead)
    import bench.throughput as throughput

    throughput.STEPS = args.steps
    with contextlib.ExitStack() as stack:
        setup_services(stack)
        logdir = Path(tempfile.mkdtemp(prefix="switchyard-costs-"))
        before_workers = set(pids_named("celery")) | set(pids_named("python"))
        start_workers(stack, logdir, raw_workers=0, durable_workers=args.workers,
                      threads=args.threads)
        workers = sorted((set(pids_named("celery")) | set(pids_named("python")))
                         - before_workers - {os.getpid()})
        workers += [c for w in workers for c in children_of(w)]
        classes = process_classes(workers)
        durable = Durable()
        durable.owners = args.owners
        burst(durable, 200)  # warm up connections and prepared statements
        load = load_and_steal()
        report(measure(durable, args.jobs, classes), args, load)


if __name__ == "__main__":
    main()
