"""kombu's Redis transport, with one publishing client per channel instead of one per message.

kombu's Redis channel builds a new `redis.Redis` object for every message it publishes
(`conn_or_acquire` -> `_create_client`): a client's constructor fills its table of ~170
response callbacks each time, a fifth of the web's CPU per enqueue (bench/enqueue_cpu.py
--due, profiled). A `redis.Redis` is safe to share across threads (each command takes a
connection from the pool), so a channel keeps the one it made, and makes another only when
its pool was replaced (a reconnect). The consumer's asynchronous client is kombu's own.
Selected by celeryconfig for redis:// and rediss:// brokers.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _publisher: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._publisher
        if client is None or client.connection_pool is not self.pool:
            client = self._publisher = super()._create_client()
        return client


class Transport(kombu_redis.Transport):
    Channel = Channel
