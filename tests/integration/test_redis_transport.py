"""The Redis transport the broker is reached through (tasks.engine.redis_transport): a channel
publishes every message with one client, not a new one per message, makes a new one when its
pool is replaced, and what it publishes arrives."""

from __future__ import annotations

import uuid

import pytest

from tasks.celery_app import app
from tasks.engine import redis_transport
from tasks.engine.dispatch import broker_depth, dispatch
from tasks.settings import get_settings

pytestmark = pytest.mark.skipif(not get_settings().broker_url.startswith("redis"),
                                reason="the Redis transport only")


def test_a_channel_publishes_with_one_client_and_a_new_one_after_its_pool_is_replaced() -> None:
    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, redis_transport.Transport)
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
        channel._disconnect_pools()  # what kombu does to a channel after a fork
        with channel.conn_or_acquire() as third:
            assert third is not first and third.connection_pool is channel.pool


def test_wake_ups_published_through_it_arrive() -> None:
    queue = f"transport-test-{uuid.uuid4().hex[:8]}"  # no worker consumes it
    assert broker_depth(queue) == 0
    for _ in range(3):
        dispatch(uuid.uuid4(), queue, 5)
    try:
        assert broker_depth(queue) == 3
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
