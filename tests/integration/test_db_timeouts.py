"""A silent database is noticed, not waited on: the connect timeout and TCP user timeout
every engine and web connection sets (tasks.engine.pg.connect), against real sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import psycopg
import pytest

from tasks.engine import pg
from tasks.settings import get_settings


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


@pytest.fixture
def mute_server() -> Iterator[int]:
    """A port whose kernel completes the TCP handshake but whose server never says a word:
    what a partitioned or hung database looks like to a client."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_a_connection_to_a_server_that_never_answers_gives_up_after_the_connect_timeout(
        settings: pytest.MonkeyPatch, mute_server: int) -> None:
    settings.setenv("SWITCHYARD_DB_CONNECT_TIMEOUT_SECONDS", "1")
    get_settings.cache_clear()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError) as caught:
        pg.connect(f"postgresql://postgres@127.0.0.1:{mute_server}/x")
    # libpq gives up after the timeout (it tries once more, so up to twice that)
    assert time.monotonic() - started < 5
    assert pg.is_connection_error(caught.value), "retried by `persisting`, not a handler error"


def test_every_connection_sets_the_tcp_user_timeout_and_keepalives(
        settings: pytest.MonkeyPatch, db: None) -> None:
    settings.setenv("SWITCHYARD_DB_TCP_USER_TIMEOUT_SECONDS", "12")
    get_settings.cache_clear()
    with pg.connect() as conn:
        options = {o.keyword.decode(): (o.val or b"").decode() for o in conn.pgconn.info}
    assert options["tcp_user_timeout"] == "12000"
    assert options["connect_timeout"] == "5"
    assert options["keepalives"] == "1"
