"""The data dir as `switchyard up` leaves it by default (`./.switchyard`, relative): every
path derived from it is absolute, so a clone run from another working directory, and a
clone retried over the remains of a crashed one, land where the job looks for them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.coding import git
from tasks.coding.demo import ensure_demo_repo
from tasks.coding.workspace import workspace_for
from tasks.settings import get_settings


@pytest.fixture
def relative_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """SWITCHYARD_DATA_DIR left relative, read while the process sits in `tmp_path/start`."""
    start = tmp_path / "start"
    start.mkdir()
    tmp_path.chmod(0o711)
    monkeypatch.chdir(start)
    monkeypatch.setenv("SWITCHYARD_DATA_DIR", ".switchyard")
    get_settings.cache_clear()
    try:
        yield start / ".switchyard"
    finally:
        get_settings.cache_clear()


def test_a_relative_data_dir_is_made_absolute_once(relative_data_dir: Path,
                                                   tmp_path: Path) -> None:
    settings = get_settings()
    assert settings.data_dir == relative_data_dir
    os.chdir(tmp_path)  # a later change of directory moves nothing
    assert get_settings().workspaces_dir == relative_data_dir / "workspaces"
    assert workspace_for("job-1").root.is_absolute()


def test_a_clone_under_a_relative_data_dir_works_from_another_directory(
        relative_data_dir: Path, tmp_path: Path) -> None:
    bare = ensure_demo_repo(tmp_path / "repos")
    ws = workspace_for("job-2")
    os.chdir(tmp_path)
    head = git.clone(git.Source(str(bare), "local"), ws.root)
    assert (relative_data_dir / "workspaces" / "job-2" / "calculator.py").exists()
    assert git.git_dir(ws.root).is_dir()
    assert len(head) == 40


def test_a_clone_retried_after_a_crash_mid_clone_starts_clean(relative_data_dir: Path,
                                                               tmp_path: Path) -> None:
    # Given what a worker killed mid-clone leaves: a half-made checkout and repository
    bare = ensure_demo_repo(tmp_path / "repos")
    ws = workspace_for("job-3")
    ws.root.mkdir(parents=True)
    (ws.root / "calculator.py").write_text("half written")
    git.git_dir(ws.root).mkdir()
    (git.git_dir(ws.root) / "HEAD").write_text("garbage")
    (ws.root / ".git").write_text("gitdir: /nowhere\n")

    # When the retry clones again
    head = git.clone(git.Source(str(bare), "local"), ws.root)

    # Then the clone is whole and checked out at the remote's head
    remote_head = subprocess.run(["git", "--git-dir", str(bare), "rev-parse", "HEAD"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert head == remote_head
    assert "half written" not in (ws.root / "calculator.py").read_text()
