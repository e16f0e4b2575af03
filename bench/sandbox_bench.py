"""The JS sandbox's costs: a cold child start, a warm run end to end, a run with tool calls.

    python bench/sandbox_bench.py [--runs 200] [--pool 2]

(a) cold start: start_child() alone (fences, python -I, import quickjs, prelude), the
    cost a run pays when the pool is empty;
(b) warm run: sandbox.run("return input.n + 1") end to end (take a warm child, send the
    job, compile, run, read the answer, reap the child), with a pause between runs long
    enough for the pool to refill, as in a worker that is not saturated;
(c) warm run with 10 tool calls (tools.log) answered by a no-op host;
(d) back to back: runs with no pause, so the pool's refill competes with the runs (what a
    saturated worker sees on 2 cores).
No services are needed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from tasks.functions import sandbox
from tasks.functions.sandbox_pool import Pool, fences, get_pool, start_child


def percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return f"p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   (n={len(ms)})"


def wait_full(pool: Pool, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while pool.ready_count() < pool.size and time.monotonic() < end:
        time.sleep(0.005)


def host(tool: str, args: Any) -> Any:
    return None


def timed_runs(code: str, runs: int, pause: bool) -> list[float]:
    pool = get_pool()
    out = []
    for _ in range(runs):
        if pause:
            wait_full(pool)
        t = time.perf_counter()
        outcome = sandbox.run(code, {"n": 1}, host)
        out.append(time.perf_counter() - t)
        assert isinstance(outcome, sandbox.Returned), outcome
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--pool", type=int, default=2)
    args = parser.parse_args()
    os.environ["SWITCHYARD_FUNCTION_POOL_SIZE"] = str(args.pool)
    print(f"fences: {fences()}")
    cold = []
    for _ in range(max(10, args.runs // 10)):
        t = time.perf_counter()
        child = start_child()
        cold.append(time.perf_counter() - t)
        child.kill()
    print(f"(a) cold child start          {percentiles(cold)}")
    get_pool().warm()
    wait_full(get_pool())
    timed_runs("return input.n + 1", 5, pause=True)  # warm the parent's code paths
    trivial = timed_runs("return input.n + 1", args.runs, True)
    print(f"(b) warm trivial run          {percentiles(trivial)}")
    calls = "for (let i = 0; i < 10; i++) await tools.log('x', i); return 1"
    print(f"(c) warm run, 10 tool calls   {percentiles(timed_runs(calls, args.runs, True))}")
    print(f"(d) back to back, trivial     {percentiles(timed_runs('return 1', args.runs, False))}")
    get_pool().close()


if __name__ == "__main__":
    main()
