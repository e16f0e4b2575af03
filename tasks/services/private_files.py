"""One way to write a file only this user may read: up's Redis config (a password), the
commands' services file (URLs with it), up's kept token, the data dir's master secret.

The file appears whole or not at all: it is written under a temporary name, made with
O_EXCL and mode 0600 (never widened by the umask, never through a link planted at that
name), then renamed over the target, which replaces a link there rather than following it.
A reader beside the writer (`switchyard token create` while up starts) never sees half a
file, and an older file's wider mode does not survive, as it could when it was rewritten
in place.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def write_private(path: Path, text: str, *, replace: bool = True) -> bool:
    """Write `text` to `path`, readable by this user alone, in a directory that exists (its
    mode is the caller's to choose: the data dir must stay passable for the sandboxes' user).
    With replace=False an existing file wins (two processes making the same key both keep
    the first). True when this call's text is the file's."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # atomic, and never replaces what another process made first
            return True
        except FileExistsError:
            return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


DATA_DIR_MODE = 0o711


def make_data_dir(path: Path) -> None:
    """The data dir, made passable but not listable by others: the sandboxes' user (65534)
    goes through it to the paths it is given, and no other user of the machine may list the
    environments, workspaces and sockets below it. An existing one is left as it is."""
    path.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
