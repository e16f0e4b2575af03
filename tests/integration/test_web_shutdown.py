"""The web process stops promptly with event streams open: SIGTERM (a deploy, or Ctrl-C at
`switchyard up`) ends every stream first, instead of gunicorn waiting out its whole graceful
timeout for them (found by .ci/first-run: a Ctrl-C after the UI had been open took 11 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import httpx

from app.http.db import session_factory
from app.http.tokens import create_token
from app.ops.commands import web_command
from app.ops.embedded import free_port
from models.db import session_scope
from tasks.engine import pg

ROOT = Path(__file__).parents[2]


def test_sigterm_ends_open_streams_and_the_web_process_at_once(db: None,
                                                                tmp_path: Path) -> None:
    with session_scope(session_factory()) as s:
        owner, token = create_token(s, "streamer")
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'p')",
               (project, str(owner)))
    port = free_port()
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(web_command("127.0.0.1", port, 8), cwd=ROOT, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    ended: list[float] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            assert web.poll() is None, log.read_text()
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        opened = threading.Event()

        def read_stream() -> None:
            with httpx.stream("GET", f"{base}/api/projects/{project}/events",
                              headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx.Timeout(5, read=60)) as r:
                assert r.status_code == 200
                opened.set()
                for _ in r.iter_lines():
                    pass
            ended.append(time.monotonic())

        reader = threading.Thread(target=read_stream, daemon=True)
        reader.start()
        assert opened.wait(10), log.read_text()
        time.sleep(0.5)

        start = time.monotonic()
        web.send_signal(signal.SIGTERM)
        web.wait(30)
        took = time.monotonic() - start
        reader.join(5)
    finally:
        if web.poll() is None:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()
    assert took < 5, f"the web process took {took:.1f}s to stop (graceful timeout: 10)"
    assert ended and ended[0] - start < 5, "the stream did not end"
    assert web.returncode == 0, log.read_text()
