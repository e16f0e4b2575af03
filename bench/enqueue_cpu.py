"""CPU of the web's enqueue path in one process, without HTTP or a worker: what a change to
the route, the auth, the statements or the publish saves, measured apart from the noise of a
loaded host (issue 26: web CPU per enqueue <= 1.5 ms).

    python bench/enqueue_cpu.py [--requests 3000] [--profile 25]

Drives `POST /api/projects/<pid>/jobs` (a 1-step canary, parked far in the future unless
--due, so no worker is needed and the publish is measured only with --due) through Flask's
test client on the app `switchyard web` serves, after a warm-up, and prints the process's
CPU per request (user + system; the test client's own environ building included, ~0.1 ms)
and, with --profile N, the N functions with the most cumulative time. Services come from
DATABASE_URL / BROKER_URL, or are started embedded; the run gets its own database.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.costs import load_and_steal  # noqa: E402
from bench.throughput import setup_services  # noqa: E402

FUTURE = "2099-01-01T00:00:00+00:00"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--due", action="store_true",
                        help="jobs due now: each enqueue publishes its wake-up to the broker")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        setup_services(stack)
        os.environ.update({"SWITCHYARD_RATE_LIMIT_PER_SECOND": "1000000",
                           "SWITCHYARD_RATE_LIMIT_BURST": "1000000",
                           "SWITCHYARD_OWNER_MAX_ACTIVE": "0"})
        from tasks.settings import get_settings

        get_settings.cache_clear()  # the run's own database, and the limits above
        from app.http.db import session_factory
        from app.http.tokens import create_token
        from app.ops.migrations import upgrade
        from app.web import create_app
        from models.db import session_scope

        upgrade()
        with session_scope(session_factory()) as session:
            _, token = create_token(session, f"bench-{uuid.uuid4().hex[:8]}")
        client = create_app().test_client()
        auth = {"Authorization": f"Bearer {token}"}
        pid = client.post("/api/projects", headers=auth, json={"name": "cpu"}).json["id"]
        body = {"job_type": "system.canary", "payload": {"steps": 1}}
        if not args.due:
            body["run_after"] = FUTURE

        def enqueue(n: int) -> None:
            for _ in range(n):
                r = client.post(f"/api/projects/{pid}/jobs", headers=auth, json=body)
                assert r.status_code == 202, r.get_data(as_text=True)

        enqueue(args.warmup)
        load = load_and_steal()
        profiler = cProfile.Profile() if args.profile else None
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        enqueue(args.requests)
        if profiler:
            profiler.disable()
        cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
        print(f"{args.requests} enqueues ({'due: published' if args.due else 'parked'}), "
              f"one process, test client; {load}")
        print(f"CPU per request {cpu / args.requests * 1000:.3f} ms, wall per request "
              f"{wall / args.requests * 1000:.3f} ms"
              + (" (profiled: slower than without)" if profiler else ""))
        if profiler:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
