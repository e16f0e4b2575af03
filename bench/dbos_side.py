"""The canary's shape on DBOS Transact, a durable-execution library on PostgreSQL: the
fourth side of `bench/throughput.py --dbos`.

Runs under the python of a virtualenv that holds `dbos` (bench/throughput.py makes one),
never under Switchyard's own, so neither package's pins touch the other:

    python bench/dbos_side.py worker URL CONCURRENCY   # a DBOS executor serving the queue
    python bench/dbos_side.py burst URL N ROUND        # enqueue N, wait, print "jobs/s"

The job is a workflow of STEPS no-op steps, each checkpointed by DBOS before the next
(its own guarantee, the same as a Switchyard step's), enqueued from outside through
DBOSClient on a queue that the worker processes poll.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import psycopg  # DBOS's own driver, in its virtualenv
from dbos import DBOS, DBOSClient

QUEUE = "bench"
STEPS = 3
# DBOS's default poll is 1 s, which caps a burst whatever the rest costs; a user tuning
# DBOS for short jobs lowers it. It polls this often even when idle, so bench/throughput.py
# runs these workers only during DBOS's own rounds.
POLL_SECONDS = 0.01


@DBOS.step()
def noop_step(i: int, n: int) -> int:
    return n


@DBOS.workflow()
def canary(i: int, steps: int) -> int:
    for n in range(steps):
        noop_step(i, n)
    return i


def worker(url: str, concurrency: int) -> None:
    DBOS(config={"name": "switchyard-bench", "system_database_url": url,
                 "log_level": "WARNING"})
    DBOS.launch()  # before register_queue, which writes the queue's row
    DBOS.register_queue(QUEUE, worker_concurrency=concurrency, polling_interval_sec=POLL_SECONDS)
    print("ready", flush=True)  # bench/throughput.py times nothing before this
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=5)


def done(conn: psycopg.Connection, prefix: str) -> int:
    # The round's workflows by id prefix: counting every SUCCESS row would count earlier rounds.
    row = conn.execute("SELECT count(*) FROM dbos.workflow_status "
                       "WHERE status = 'SUCCESS' AND workflow_uuid LIKE %s",
                       (prefix + "%",)).fetchone()
    return int(row[0]) if row else 0


def burst(url: str, n: int, round_: str) -> None:
    client = DBOSClient(system_database_url=url)
    prefix = f"r{round_}-"
    t0 = time.perf_counter()
    for i in range(n):
        client.enqueue({"workflow_name": "canary", "queue_name": QUEUE,
                        "workflow_id": f"{prefix}{i}"}, i, STEPS)
    with psycopg.connect(url, autocommit=True) as conn:
        while done(conn, prefix) < n:
            time.sleep(0.1)
    elapsed = time.perf_counter() - t0
    client.destroy()
    print(f"{n / elapsed:.1f}", flush=True)


if __name__ == "__main__":
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "worker":
        worker(url, int(sys.argv[3]))
    else:
        burst(url, int(sys.argv[3]), sys.argv[4])
