"""What a refused local repo_url tells a tenant: why, never where the operator keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.coding.gitsource import check_source
from tasks.engine.errors import PermanentError


def test_a_path_outside_the_roots_is_refused_without_naming_them(tmp_path: Path) -> None:
    root = tmp_path / "operator-secret-place" / "repos"
    root.mkdir(parents=True)
    with pytest.raises(PermanentError) as refused:
        check_source("/etc", [root])
    message = str(refused.value)
    assert "not under a local repository root" in message and "SWITCHYARD_LOCAL_REPOS" in message
    assert "operator-secret-place" not in message, message
