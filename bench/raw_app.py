"""The raw-Celery side of the benchmark: a no-op task tuned like the engine's (same broker,
acks_late, JSON, no result backend, reused producer). Its only work is recording its start
time, which is how the benchmark knows it ran.

`bench.steps_by_hand` is the same task made durable by hand, the least a Celery user who
records each step in PostgreSQL writes: one committed INSERT a step (no claim, fencing,
events, heartbeats or replay), for `bench/throughput.py --by-hand`."""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery

app = Celery("bench_raw", broker=os.environ["BROKER_URL"])
app.conf.update(
    task_serializer="json", accept_content=["json"], task_ignore_result=True,
    task_acks_late=True, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=int(os.environ.get("SWITCHYARD_PREFETCH_MULTIPLIER", "64")),
)
RESULTS = "bench:raw:started"
RESULTS_BY_HAND = "bench:by-hand:started"
BY_HAND_TABLE = "CREATE TABLE IF NOT EXISTS bench_steps_by_hand (job int, step int, at timestamptz)"
_redis: redis.Redis | None = None
_pg: Any = None


@app.task(name="bench.noop", acks_late=True, ignore_result=True)
def noop(i: int) -> None:
    global _redis
    started = time.time()
    if _redis is None:
        _redis = redis.Redis.from_url(os.environ["BROKER_URL"])
    _redis.rpush(RESULTS, f"{i} {started:.6f}")


@app.task(name="bench.steps_by_hand", acks_late=True, ignore_result=True)
def steps_by_hand(i: int, steps: int) -> None:
    global _redis, _pg
    started = time.time()
    if _pg is None:
        import psycopg

        _pg = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    for step in range(1, steps + 1):  # autocommit: each step's row is committed on its own
        _pg.execute("INSERT INTO bench_steps_by_hand (job, step, at) VALUES (%s, %s, now())",
                    (i, step))
    if _redis is None:
        _redis = redis.Redis.from_url(os.environ["BROKER_URL"])
    _redis.rpush(RESULTS_BY_HAND, f"{i} {started:.6f}")
