"""What an operator typing a command with a wrong setting reads: one line saying what is
wrong and how to fix it, never a traceback, never a password from a URL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SWITCHYARD = str(Path(sys.executable).parent / "switchyard")
SECRET = "SeCrEtPw"


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **env}
    return subprocess.run([SWITCHYARD, *args], env=environ, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize(("env", "args", "says"), [
    ({"SWITCHYARD_HEARTBEAT_SECONDS": "abc"}, ("jobs",),
     "SWITCHYARD_HEARTBEAT_SECONDS must be a number"),
    ({"SWITCHYARD_STALE_AFTER_SECONDS": "5", "SWITCHYARD_HEARTBEAT_SECONDS": "10"}, ("migrate",),
     "at least 3 x"),
    ({"DATABASE_URL": f"mysql://u:{SECRET}@h/db"}, ("token", "list"),
     "DATABASE_URL must be a PostgreSQL URL"),
    ({"DATABASE_URL": "notaurl"}, ("migrate",), "DATABASE_URL must be a PostgreSQL URL"),
    ({"DATABASE_URL": f"postgresql://postgres:{SECRET}@127.0.0.1:notaport/x"}, ("migrate",),
     "DATABASE_URL has a port that is not a number"),
    ({"BROKER_URL": f"kafka://u:{SECRET}@h:1"}, ("jobs",),
     "BROKER_URL must be a redis://, rediss:// or amqp:// URL"),
    # A system's own settings are checked before a process starts, not at its first job
    ({"SWITCHYARD_LLM_PROVIDER": "gemini"}, ("worker",), "SWITCHYARD_LLM_PROVIDER must be one of"),
    ({"SWITCHYARD_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": ""},
     ("enqueue", "00000000-0000-0000-0000-000000000000", "system.canary"),
     "needs ANTHROPIC_API_KEY"),
    ({}, ("enqueue", "notauuid", "system.canary"), "PROJECT must be a project id"),
], ids=["number", "combination", "mysql", "not a url", "port", "kafka", "provider", "key",
        "project id"])
def test_a_wrong_setting_is_one_line_without_a_traceback_or_a_password(
        env: dict[str, str], args: tuple[str, ...], says: str) -> None:
    done = run(*args, **env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("Error: ") and says in lines[-1], done.stderr
    assert "Traceback" not in done.stderr and SECRET not in done.stderr + done.stdout
