"""The raw-Celery side of the benchmark: a no-op task tuned like the engine's (same broker,
acks_late, JSON, no result backend, reused producer). Its only work is recording its start
time, which is how the benchmark knows it ran."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

app = Celery("bench_raw", broker=os.environ["BROKER_URL"])
app.conf.update(
    task_serializer="json", accept_content=["json"], task_ignore_result=True,
    task_acks_late=True, worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=int(os.environ.get("SWITCHYARD_PREFETCH_MULTIPLIER", "64")),
)
RESULTS = "bench:raw:started"
_redis: redis.Redis | None = None


@app.task(name="bench.noop", acks_late=True, ignore_result=True)
def noop(i: int) -> None:
    global _redis
    started = time.time()
    if _redis is None:
        _redis = redis.Redis.from_url(os.environ["BROKER_URL"])
    _redis.rpush(RESULTS, f"{i} {started:.6f}")
