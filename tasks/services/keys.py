"""The server's master secret, and the keys derived from it for each use.

SWITCHYARD_SECRET_KEY, else a random key made once per data dir and kept there
(0600), so `switchyard up` needs no setup and its sessions and sealed secrets
survive a restart. Several hosts (or web and workers on different machines) must
share the variable. Each use gets its own key through HKDF, so the cookie
signer never holds the key that seals project secrets.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from tasks.services.private_files import make_data_dir, write_private
from tasks.settings import Settings

SECRET_FILE = "web-secret-key"  # the name predates the keystore: kept so old data dirs work


def master_key(settings: Settings) -> str:
    if settings.secret_key:
        return settings.secret_key
    path = Path(settings.data_dir) / SECRET_FILE
    if not path.exists():
        # Passable, not private: the sandboxes' user goes through it to their runtime copies.
        make_data_dir(path.parent)
        # Web and workers may start at once: the first key made is the one all keep.
        write_private(path, secrets.token_urlsafe(48), replace=False)
    return path.read_text().strip()


def derived_key(settings: Settings, purpose: str) -> bytes:
    """32 bytes for one purpose ("project-secrets/v1"), from the master secret."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=f"switchyard/{purpose}".encode()).derive(master_key(settings).encode())


def key_id(key: bytes) -> str:
    """A short public name for a key: tells which key sealed a value, reveals nothing of it."""
    return hashlib.sha256(b"switchyard key id:" + key).hexdigest()[:12]
