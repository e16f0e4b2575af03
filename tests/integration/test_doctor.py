"""`switchyard doctor` on this machine, and on the same machine with parts taken away."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.ops.doctor import Check, exit_code, fixes, summary

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from app.ops.cli import main; main()", "doctor"]
IN_CI = os.environ.get("CI") == "true"


def _doctor(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def _path_without(tmp_path: Path, *programs: str) -> str:
    """A PATH with every program of the usual one but `programs`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = bin_dir / name
            if name not in programs and not target.exists():
                target.symlink_to(Path(d) / name)
    return str(bin_dir)


def test_a_machine_with_every_part_is_ready_for_every_system() -> None:
    done = _doctor(dict(os.environ))
    if done.returncode != 0 and not IN_CI:
        pytest.skip(f"this machine lacks a part:\n{done.stdout}")
    assert done.returncode == 0, done.stdout + done.stderr
    for system in ("engine", "startup OS", "browser checks", "coding agent", "functions"):
        assert f"{system}: ready" in done.stdout
    assert "Chromium" in done.stdout and "doctor: 5 of 5 systems ready" in done.stdout
    # what runs a Python repository's tests (the README's apt line installs it)
    assert "pytest for python3" in done.stdout


def test_missing_parts_fail_their_system_only_with_the_fix(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _path_without(tmp_path, "rg", "bwrap")}
    done = _doctor(env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "coding agent: NOT READY" in done.stdout
    assert "fix: apt-get install -y ripgrep" in done.stdout
    assert "fix: apt-get install -y bubblewrap" in done.stdout
    assert "engine: ready" in done.stdout
    # Functions fail closed without bubblewrap too (issue 25.4), and say how to fix it
    assert "functions: NOT READY" in done.stdout
    assert "coding agent lacks ripgrep, bubblewrap sandbox; functions lacks JS sandbox" \
        in done.stdout
    assert "bubblewrap is not installed" in done.stdout


def test_the_summary_names_each_system_that_cannot_run_and_what_it_lacks() -> None:
    checks = [Check("engine", "PostgreSQL (embedded)", True, "ok"),
              Check("coding agent", "git", False, "not installed", "apt-get install -y git"),
              Check("coding agent", "Node.js and npm", False, "no", "apt-get install -y nodejs",
                    required=False),
              Check("browser checks", "Chromium", False, "not installed",
                    "apt-get install -y chromium")]
    assert summary(checks) == ("doctor: 3 of 5 systems ready; browser checks lacks Chromium; "
                               "coding agent lacks git")
    assert exit_code(checks) == 1
    assert exit_code(checks[:1] + checks[2:3]) == 0, "an optional part never fails doctor"
    assert fixes(checks) == ["apt-get install -y git", "apt-get install -y nodejs",
                             "apt-get install -y chromium"]


@pytest.mark.parametrize(("bwrap", "container", "fix"), [
    (None, True, "apt-get install -y bubblewrap"),  # missing: install it, container or not
    ("/usr/bin/bwrap", True, "seccomp=deploy/seccomp-bwrap.json"),  # there, but refused
    ("/usr/bin/bwrap", False, "kernel.unprivileged_userns_clone=1"),  # a host's sysctl
])
def test_a_sandbox_that_cannot_run_gets_the_fix_for_why(
        monkeypatch: pytest.MonkeyPatch, bwrap: str | None, container: bool, fix: str) -> None:
    from app.ops import doctor

    monkeypatch.setattr(doctor.shutil, "which", lambda name, *a, **k: bwrap)
    monkeypatch.setattr(doctor, "_in_container", lambda: container)
    check = Check("coding agent", "bubblewrap sandbox", False, "why",
                  "apt-get install -y bubblewrap")
    fixed = doctor._sandbox_fix(check)
    assert not fixed.ok and fix in fixed.fix
    assert ("container refuses user namespaces" in fixed.detail) is (bwrap is not None
                                                                      and container)


def test_the_package_index_is_asked_for_one_project_not_its_whole_list(tmp_path: Path) -> None:
    # PyPI's root lists every project (tens of MB): read with a 5 s timeout, it often did
    # not finish and doctor said an index that answers did not
    import http.server
    import threading

    class Index(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/":
                time.sleep(8)  # the whole list, slowly
            self.send_response(200 if self.path == "/simple/pip/" else 404)
            self.end_headers()
            self.wfile.write(b"<a href='pip-24.0.tar.gz'>pip-24.0.tar.gz</a>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/simple/"
        done = _doctor({**os.environ, "PIP_INDEX_URL": index})
    finally:
        server.shutdown()
    line = next(x for x in done.stdout.splitlines() if "Python package index" in x)
    assert line.split()[0] == "ok" and "answers" in line, done.stdout
