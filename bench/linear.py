"""Cost that stays flat: per step from 1 to 100 steps, per job from 10 k to 1 M jobs of history.

    python bench/linear.py [--steps 1,10,100] [--history 10000,100000,1000000] [--jobs 500]

(a) Steps: canaries of 1, 10 and 100 steps through real workers (2 x `celery -P solo`,
    as bench/costs.py), about 3,000 steps each; CPU (worker + PostgreSQL + Redis +
    producer) and statements per step. A job's fixed cost (enqueue, claim, finish) is
    spread over its steps, so the per-step figure should fall and then level off.
(b) History: the hot path's statements (enqueue, claim, a checkpoint per step, finish),
    run in this process against tables holding 10 k, 100 k and 1 M finished jobs of
    another project (with their steps), after ANALYZE; milliseconds per 3-step job. Every
    hot-path statement goes through a primary key or a partial index of unfinished rows,
    so history must not show here.

Services come from DATABASE_URL / BROKER_URL, or are started embedded. Print the
machine's load and steal beside the figures; compare only within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.costs import (  # noqa: E402
    children_of,
    load_and_steal,
    measure,
    pids_named,
    process_classes,
)
from bench.history import History  # noqa: E402
from bench.throughput import Durable, burst, setup_services, start_workers  # noqa: E402


def per_step(durable: Durable, classes: dict[str, Callable[[], list[int]]],
             steps: list[int]) -> None:
    import bench.throughput as throughput

    print("\n(a) per step, through 2 solo workers")
    print(f"{'steps/job':>9} {'jobs':>6} {'CPU ms/step':>12} {'statements/step':>16} "
          f"{'event rows/step':>16} {'WAL bytes/step':>15}")
    for n in steps:
        throughput.STEPS = n
        jobs = max(20, 3000 // n)
        moved = measure(durable, jobs, classes)
        cpu = sum(v for k, v in moved.items() if k.startswith("cpu "))
        print(f"{n:>9} {jobs:>6} {cpu / n * 1e3:>12.3f} {moved['commits'] / n:>16.2f} "
              f"{moved['events'] / n:>16.2f} {moved['wal'] / n:>15.0f}")


def one_job(project: str) -> None:
    """The hot path of a 3-step job, in this process: enqueue, claim, 3 checkpoints, finish."""
    from tasks.engine import store
    from tasks.engine.enqueue import EnqueueRequest, enqueue
    from tasks.engine.status import JobStatus

    job = enqueue(EnqueueRequest(project_id=project, job_type="system.canary",
                                 payload={"steps": 3}), publish=False)
    claimed = store.claim(job.job_id, "bench-linear")
    assert claimed is not None
    owner, wseq = store.Owner(claimed.id, claimed.token), 0
    pending = None
    for seq in (1, 2, 3):
        wseq += 1
        store.checkpoint(owner, wseq, pending, seq=seq, name=f"step-{seq}", events=[])
        pending = store.PendingStep(seq, f"step-{seq}", "completed", output='{"n": 1}')
    store.finish(owner, wseq + 1, JobStatus.COMPLETED, pending, result='{"steps": 3}')


def history(pg, sizes: list[int], jobs: int) -> None:
    print(f"\n(b) hot-path statements of a 3-step job (in-process, {jobs} jobs per size)")
    print(f"{'history jobs':>12} {'ms/job p50':>11} {'ms/job mean':>12}")
    owner, live = str(uuid.uuid4()), str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, 'linear')", (owner,))
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'live')", (live, owner))
    past = History(pg, owner)
    for size in sizes:
        past.grow(size)
        for _ in range(50):  # warm the prepared statements
            one_job(live)
        times = []
        for _ in range(jobs):
            t = time.perf_counter()
            one_job(live)
            times.append(time.perf_counter() - t)
        print(f"{size:>12,} {statistics.median(times) * 1e3:>11.2f} "
              f"{statistics.fmean(times) * 1e3:>12.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="1,10,100")
    parser.add_argument("--history", default="10000,100000,1000000")
    parser.add_argument("--jobs", type=int, default=500)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        setup_services(stack)
        print(f"before: {load_and_steal()}")
        durable = Durable()
        if args.steps:
            logdir = Path(tempfile.mkdtemp(prefix="switchyard-linear-"))
            before = set(pids_named("celery")) | set(pids_named("python"))
            start_workers(stack, logdir, raw_workers=0)
            workers = sorted((set(pids_named("celery")) | set(pids_named("python")))
                             - before - {os.getpid()})
            workers += [c for w in workers for c in children_of(w)]
            classes = process_classes(workers)
            durable.reset()
            burst(durable, 200)
            per_step(durable, classes, [int(s) for s in args.steps.split(",")])
        if args.history:
            history(durable.pg, [int(s) for s in args.history.split(",")], args.jobs)
        print(f"after: {load_and_steal()}")


if __name__ == "__main__":
    main()
