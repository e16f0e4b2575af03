"""Queue names and how a job's priority (0-9, higher runs first) reaches the broker."""

from __future__ import annotations

QUEUES: tuple[str, ...] = ("default", "agents", "io", "browser", "sweeps")
DEFAULT_PRIORITY = 5
MAX_PRIORITY = 9


def broker_priority(priority: int, broker_url: str) -> int:
    """Redis pops priority 0 first; AMQP delivers 9 first. The API always means 9 = most urgent."""
    if broker_url.startswith(("redis", "rediss", "sentinel")):
        return MAX_PRIORITY - priority
    return priority
