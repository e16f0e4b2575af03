"""Reading a hostile repository's config files safely: never through a link, never blocking on
a FIFO or device, never more than CONFIG_MAX_BYTES; an odd or broken file configures nothing."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

CONFIG_MAX_BYTES = 1024 * 1024  # a bigger "config file" configures nothing


def regular(path: Path) -> bool:
    """A regular file itself, not a link: a hostile repository's `pyproject.toml` may point
    at any file of the worker's."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def text(path: Path, limit: int = CONFIG_MAX_BYTES) -> str:
    """A config file's text, read without following a link, never blocking on a FIFO or
    device, and at most `limit` bytes ("" otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        data = f.read(limit + 1)
    return "" if len(data) > limit else data.decode(errors="replace")


def toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text(path))
    except tomllib.TOMLDecodeError:
        return {}  # a broken pyproject configures nothing we could run


def json_file(path: Path) -> Any:
    try:
        return json.loads(text(path) or "{}")
    except ValueError:
        return {}


def table(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object or TOML table, else empty: odd files configure nothing."""
    return value if isinstance(value, dict) else {}
