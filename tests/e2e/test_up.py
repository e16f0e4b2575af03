"""`switchyard up` on a fresh machine: embedded services, the UI's address printed, a clean stop."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.e2e.procs import free_port

UP = re.compile(r"Switchyard is up: (\S+)")
TOKEN = re.compile(r"API token \(owner 'local'\): (sy_\S+)")


def test_up_prints_the_uis_address_that_signs_in_with_the_printed_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "BROKER_URL", "SWITCHYARD_SMTP_HOST")}
    env["SWITCHYARD_DATA_DIR"] = str(tmp_path / "data")
    port = free_port()
    proc, log = _start(env, port, tmp_path / "up.log")
    try:
        text = log.read_text()
        url, token = UP.search(text).group(1), TOKEN.search(text).group(1)  # type: ignore[union-attr]

        # The printed address is the UI, and it answers as soon as it is printed
        assert url == f"http://127.0.0.1:{port}/"
        with httpx.Client(base_url=url, timeout=10) as client:
            page = client.get("/")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            assert 'name="token"' in page.text  # the sign-in form
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
            signed_in = client.post("/signin", data={"token": token, "csrf": csrf})
            assert signed_in.status_code in (302, 303)
            assert client.get("/api/projects").status_code == 200

        # The README's `switchyard token create alice | tail -1`, in another terminal beside
        # up: the same data dir, no DATABASE_URL, and it reaches up's embedded database
        made = _cli(env, "token", "create", "alice")
        assert made.returncode == 0, made.stderr
        alice = made.stdout.strip().splitlines()[-1]
        with httpx.Client(base_url=url, timeout=10) as client:
            listed = client.get("/api/projects", headers={"Authorization": f"Bearer {alice}"})
            assert listed.status_code == 200
        jobs = _cli(env, "jobs")
        assert jobs.returncode == 0, jobs.stderr
    finally:
        _stop(proc)
    assert proc.returncode == 0, log.read_text()[-3000:]
    # up is gone, and so is what it left for the commands beside it
    assert not (tmp_path / "data" / "run" / "services.json").exists()
    # a database that does not answer: one line saying what to do, not a traceback
    gone = _cli({**env, "DATABASE_URL": "postgresql://postgres@127.0.0.1:9/switchyard"},
                "token", "list")
    assert gone.returncode == 1
    said = gone.stderr.strip().splitlines()
    assert said[-1].startswith("Error: cannot reach the database"), gone.stderr
    assert "Traceback" not in gone.stderr
    assert "DATABASE_URL" in said[-1] and "switchyard up" in said[-1]

    # Started again on the same data dir: the same token, still good (not one more each time)
    again, log = _start(env, free_port(), tmp_path / "up-again.log")
    try:
        text = log.read_text()
        assert TOKEN.search(text).group(1) == token  # type: ignore[union-attr]
        url = UP.search(text).group(1)  # type: ignore[union-attr]
        auth = {"Authorization": f"Bearer {token}"}
        listed = httpx.get(url + "api/projects", headers=auth, timeout=10)
        assert listed.status_code == 200

        # A worker killed under up (the OOM killer, a kill -9) is started again; the web
        # and what it serves stay up, and jobs still run
        [worker] = [pid for pid, cmd in _children(again.pid) if "--queues" in cmd
                    and "sweeps" not in cmd.split("--queues", 1)[1].split()[0]]
        os.kill(worker, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while "worker exited with -9; starting it again" not in log.read_text():
            assert again.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        project = httpx.post(url + "api/projects", json={"name": "after"}, headers=auth,
                             timeout=10).json()["id"]
        job = httpx.post(url + f"api/projects/{project}/jobs", headers=auth, timeout=10,
                         json={"job_type": "system.canary"}).json()["job_id"]
        while httpx.get(url + f"api/jobs/{job}", headers=auth,
                        timeout=10).json()["status"] != "completed":
            assert time.monotonic() < deadline + 60, log.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        _stop(again)
    assert again.returncode == 0, log.read_text()[-3000:]


def _children(parent: int) -> list[tuple[int, str]]:
    """(pid, command line) of each process whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError):
                continue
            if ppid == parent:
                found.append((int(entry.name), cmd))
    return found


def _start(env: dict[str, str], port: int, log: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """`switchyard up` in its own session, once it printed the UI's address."""
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.ops.cli", "up", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + 90
    while not UP.search(log.read_text()) and time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(log.read_text())
        time.sleep(0.2)
    return proc, log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    try:
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.ops.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60)
