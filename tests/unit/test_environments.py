"""A set-up environment as later commands see it: what the setup (tenant code) wrote is
bound only where it is what it claims to be."""

from __future__ import annotations

import os
from pathlib import Path

from tasks.coding.environments import mounts


def test_node_modules_is_bound_only_when_it_is_a_real_directory_inside(tmp_path: Path,
                                                                       monkeypatch) -> None:
    monkeypatch.setattr("tasks.coding.environments.path_for", lambda key: tmp_path / key)
    env = tmp_path / "k1"
    (env / "node" / "node_modules" / "left-pad").mkdir(parents=True)
    assert mounts("k1", {}).node_modules == env / "node" / "node_modules"
    # A link planted by a setup script (to /, or out of the environment) binds nothing
    for target in ("/", str(tmp_path)):
        os.rename(env / "node" / "node_modules", env / "node" / "real")
        (env / "node" / "node_modules").symlink_to(target)
        assert mounts("k1", {}).node_modules is None
        (env / "node" / "node_modules").unlink()
        os.rename(env / "node" / "real", env / "node" / "node_modules")
    (env / "node").rename(env / "elsewhere")
    (env / "node").symlink_to(env / "elsewhere")
    assert mounts("k1", {}).node_modules is None
