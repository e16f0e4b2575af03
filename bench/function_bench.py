"""A trivial function from enqueue to result: p50 and p99 end to end (issue 13).

    python bench/function_bench.py [--runs 200] [--warmup 10]

Services come from DATABASE_URL / BROKER_URL, or are started embedded (bench.throughput's
setup). One `-P solo` worker process with its warm sandbox pool; runs go one at a time, so
each figure is a single run's latency: enqueue (insert + publish), claim, the load step,
one sandbox run of `return input.n + 1`, and the job's end, polled from PostgreSQL every
millisecond. A second figure runs a function with one tool call (a recorded step).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.throughput import pct, setup_services, start_workers  # noqa: E402

FUNCTIONS = {"trivial": "return input.n + 1;",
             "one_call": "const t = Date.now(); return input.n + (t > 0 ? 1 : 0);"}


def measure(project: str, name: str, runs: int) -> list[float]:
    import tasks.catalog  # noqa: F401 - registers every job type
    from tasks.engine import pg
    from tasks.engine.enqueue import EnqueueRequest, enqueue

    latencies = []
    for n in range(runs):
        t0 = time.perf_counter()
        job = enqueue(EnqueueRequest(project_id=project, job_type="function.run",
                                     payload={"name": name, "input": {"n": n}}))
        while True:
            status = pg.fetch_value("SELECT status FROM agent_jobs WHERE id = %s", (job.job_id,))
            if status in ("completed", "failed"):
                break
            time.sleep(0.001)
        latencies.append((time.perf_counter() - t0) * 1000)
        assert status == "completed", f"run {n} of {name} {status}"
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        setup_services(stack)
        start_workers(stack, Path(tempfile.mkdtemp(prefix="switchyard-fbench-")),
                      raw_workers=0, durable_workers=1)
        from tasks.engine import pg
        from tasks.functions import store

        owner, project = str(uuid.uuid4()), str(uuid.uuid4())
        pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (owner, owner))
        pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'bench')",
                   (project, owner))
        for name, code in FUNCTIONS.items():
            store.save(project, name, code)
        for name in FUNCTIONS:
            measure(project, name, args.warmup)
            ms = measure(project, name, args.runs)
            print(f"function.run {name:9} {args.runs} runs: p50 {statistics.median(ms):.1f} ms, "
                  f"p99 {pct(ms, 99):.1f} ms, min {min(ms):.1f} ms, max {max(ms):.1f} ms")


if __name__ == "__main__":
    main()
