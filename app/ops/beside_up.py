"""How a command finds the embedded services of the `switchyard up` running beside it.

`up` starts PostgreSQL (on a Unix socket in the data dir) and Redis (on a free port, with a
password) and hands their URLs to its own children only: the README's `switchyard token
create alice`, typed in another terminal, fell back to DATABASE_URL's default and failed.
So up leaves the URLs it made in a file under the data dir, readable by this user alone
(Redis's URL carries its password), and removes it when it stops; a command run with the
same SWITCHYARD_DATA_DIR and without the variables takes them from there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tasks.services.private_files import write_private

NAMES = ("DATABASE_URL", "BROKER_URL")


def path(data_dir: Path) -> Path:
    return data_dir / "run" / "services.json"


def record(data_dir: Path, urls: dict[str, str]) -> None:
    """Leave `urls` (those of NAMES up started itself) for the commands beside it, with up's
    pid: a file left by an up that was killed names services that are gone."""
    path(data_dir).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(path(data_dir), json.dumps(
        {"pid": os.getpid(), **{k: v for k, v in urls.items() if k in NAMES}}))


def forget(data_dir: Path) -> None:
    path(data_dir).unlink(missing_ok=True)


def adopt(data_dir: Path) -> list[str]:
    """Set each of NAMES the environment lacks from up's file; the names set. Only a file
    of this user's, readable by no one else, whose up still runs: the data dir may be a
    directory someone else prepared (the default is relative to where the command runs)."""
    target = path(data_dir)
    try:
        st = target.stat()
        urls = json.loads(target.read_text())
    except (OSError, ValueError):
        return []
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or not isinstance(urls, dict) \
            or not _running(urls.get("pid")):
        return []
    taken = [k for k in NAMES if not os.environ.get(k) and isinstance(urls.get(k), str)]
    for name in taken:
        os.environ[name] = urls[name]
    return taken


def _running(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # there, another user's: the file's owner check above decides
    return True
