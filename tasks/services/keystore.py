"""A project's own credentials: sealed at rest, read only by the effect that uses them.

A value is sealed with AES-GCM under a key derived from the server's master
secret (tasks.services.keys), with the project and the name as associated data, so a
ciphertext moved to another project or name fails to open instead of lending a
credential. Values never leave through the API (names and update times only)
and never reach a log, an event or an error message: `SecretUnreadable` says
which key is missing, never what the value was.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tasks.engine import pg
from tasks.engine.errors import PermanentError
from tasks.services.keys import derived_key, key_id
from tasks.settings import Settings, get_settings

NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")  # fullmatch: "$" would let a trailing \n in
NAME_RULE = "1-64 characters: a lowercase letter, then lowercase letters, digits or _"
VALUE_MAX = 16 * 1024  # characters: tokens and keys, not files
MAX_PER_PROJECT = 50  # names: credentials, not a store
PURPOSE = "project-secrets/v1"
NONCE = 12


class SecretUnreadable(PermanentError):
    """A sealed value this process cannot open: sealed under another master secret."""


@dataclass(frozen=True)
class SecretInfo:
    name: str
    created_at: datetime
    updated_at: datetime


def _key(settings: Settings | None = None) -> bytes:
    return derived_key(settings or get_settings(), PURPOSE)


def _aad(project_id: str, name: str) -> bytes:
    return f"{project_id}\x00{name}".encode()


def seal(key: bytes, project_id: str, name: str, value: str) -> bytes:
    nonce = os.urandom(NONCE)  # random 96-bit nonces: safe far beyond any project's writes
    return nonce + AESGCM(key).encrypt(nonce, value.encode(), _aad(project_id, name))


def unseal(key: bytes, project_id: str, name: str, blob: bytes) -> str:
    try:
        return AESGCM(key).decrypt(blob[:NONCE], blob[NONCE:], _aad(project_id, name)).decode()
    except InvalidTag:
        raise SecretUnreadable(
            f"the project secret {name!r} cannot be opened with this server's key: it was "
            "sealed under another SWITCHYARD_SECRET_KEY (every web and worker process must "
            "share one); set it again") from None


def put(project_id: str, name: str, value: str) -> bool:
    """Set (or replace) a secret; False, and nothing written, when it would be a project's
    MAX_PER_PROJECT + 1st (two new names set at the same instant may both pass)."""
    key = _key()
    pid = str(project_id)
    return pg.execute(
        "INSERT INTO project_secrets (project_id, name, ciphertext, key_id) "
        "SELECT %(p)s, %(n)s, %(c)s, %(k)s WHERE EXISTS (SELECT 1 FROM project_secrets "
        "WHERE project_id = %(p)s AND name = %(n)s) OR (SELECT count(*) FROM project_secrets "
        f"WHERE project_id = %(p)s) < {MAX_PER_PROJECT} "
        "ON CONFLICT (project_id, name) DO UPDATE SET ciphertext = EXCLUDED.ciphertext, "
        "key_id = EXCLUDED.key_id, updated_at = now()",
        {"p": pid, "n": name, "c": seal(key, pid, name, value), "k": key_id(key)}) > 0


def listing(project_id: str) -> list[SecretInfo]:
    rows = pg.fetch_dicts("SELECT name, created_at, updated_at FROM project_secrets "
                          "WHERE project_id = %s ORDER BY name", (str(project_id),))
    return [SecretInfo(**row) for row in rows]


def delete(project_id: str, name: str) -> bool:
    return pg.execute("DELETE FROM project_secrets WHERE project_id = %s AND name = %s",
                      (str(project_id), name)) > 0


def read(project_id: str, names: Iterable[str]) -> dict[str, str]:
    """The named secrets the project has set, opened; the ones it has not are absent."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    key = _key()
    rows = pg.fetch_dicts("SELECT name, ciphertext FROM project_secrets "
                          "WHERE project_id = %s AND name = ANY(%s)", (str(project_id), wanted))
    return {r["name"]: unseal(key, str(project_id), r["name"], bytes(r["ciphertext"]))
            for r in rows}
