"""What a command takes from the file `switchyard up` leaves beside it (app.ops.beside_up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.ops import beside_up

URL = "postgresql://postgres@/postgres?host=/somewhere/pg"


@pytest.fixture
def clean_env() -> Iterator[None]:
    """None of NAMES set; afterwards exactly as before (adopt sets os.environ itself, which
    monkeypatch would not undo for a variable that was not set)."""
    before = {name: os.environ.pop(name, None) for name in beside_up.NAMES}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_a_running_ups_urls_are_taken_where_the_environment_has_none(
        tmp_path: Path, clean_env: None) -> None:
    beside_up.record(tmp_path, {"DATABASE_URL": URL, "BROKER_URL": "redis://:pw@h:1/0",
                                "OTHER": "x"})
    assert beside_up.path(tmp_path).stat().st_mode & 0o777 == 0o600
    os.environ["BROKER_URL"] = "redis://mine:6379/0"  # the user's own wins
    assert beside_up.adopt(tmp_path) == ["DATABASE_URL"]
    assert os.environ["DATABASE_URL"] == URL
    assert os.environ["BROKER_URL"] == "redis://mine:6379/0"
    assert "OTHER" not in os.environ
    beside_up.forget(tmp_path)
    assert not beside_up.path(tmp_path).exists()


def test_a_killed_ups_file_is_not_taken(tmp_path: Path, clean_env: None) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    beside_up.path(tmp_path).parent.mkdir(parents=True)
    fd = os.open(beside_up.path(tmp_path), os.O_WRONLY | os.O_CREAT, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"pid": int(gone.stdout), "DATABASE_URL": URL}, out)
    assert beside_up.adopt(tmp_path) == []
    assert "DATABASE_URL" not in os.environ


def test_a_file_others_can_read_or_write_is_not_taken(tmp_path: Path, clean_env: None) -> None:
    beside_up.record(tmp_path, {"DATABASE_URL": URL})
    beside_up.path(tmp_path).chmod(0o644)
    assert beside_up.adopt(tmp_path) == []
    assert "DATABASE_URL" not in os.environ
