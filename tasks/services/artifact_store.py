"""Where artifacts' bytes live: a directory under the data dir, or an S3-compatible bucket.

Keys are made here, from the project's id and the bytes' SHA-256 only (never from a
name a tenant chose), and checked again before any use, so a key read back from the
database cannot reach outside the store. Writing a key that is already there is a
no-op: the same bytes are stored once, however often a step is replayed.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from tasks.settings import Settings, get_settings

CHUNK = 64 * 1024
KEY = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/"
                 r"[0-9a-f]{2}/[0-9a-f]{64}")


class ArtifactMissing(LookupError):
    """The store has no bytes under a key the database names."""


class StoreUnavailable(RuntimeError):
    """The store could not be reached or refused the request (not a missing key)."""


def storage_key(project_id: str | uuid.UUID, sha256_hex: str) -> str:
    key = f"{uuid.UUID(str(project_id))}/{sha256_hex[:2]}/{sha256_hex}"
    return checked(key)


def checked(key: str) -> str:
    if not KEY.fullmatch(key):
        raise ValueError(f"not an artifact storage key: {key!r}")
    return key


class ArtifactStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str) -> None:
        """Store `data` under `key` unless it is there already (keys are content addresses)."""

    def open(self, key: str) -> Iterator[bytes]:
        """The bytes in chunks; raises ArtifactMissing before yielding when there are none."""


class LocalStore:
    def __init__(self, root: Path):
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root / checked(key)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size == len(data):
                return
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed into place: a reader never sees a half-written file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def open(self, key: str) -> Iterator[bytes]:
        try:
            f = self._path(key).open("rb")
        except FileNotFoundError:
            raise ArtifactMissing(key) from None
        return _chunks(f)


def _chunks(f: Any) -> Iterator[bytes]:
    try:
        while chunk := f.read(CHUNK):
            yield chunk
    finally:
        f.close()


class S3Store:
    """Any S3-speaking store (AWS, MinIO, Ceph, R2...): boto3, path-style under a custom
    endpoint. Credentials: the settings' pair, else boto3's own chain (AWS_* variables,
    profiles, instance roles)."""

    def __init__(self, settings: Settings):
        import boto3
        from botocore.config import Config

        self.bucket = settings.artifacts_s3_bucket
        self.prefix = f"{settings.artifacts_s3_prefix}/" if settings.artifacts_s3_prefix else ""
        config = Config(connect_timeout=5, read_timeout=30,
                        retries={"max_attempts": 3, "mode": "standard"},
                        s3={"addressing_style": "path"
                            if settings.artifacts_s3_endpoint_url else "auto"})
        credentials = {}
        if settings.artifacts_s3_access_key_id:
            credentials = {"aws_access_key_id": settings.artifacts_s3_access_key_id,
                           "aws_secret_access_key": settings.artifacts_s3_secret_access_key}
        self.client = boto3.session.Session().client(
            "s3", endpoint_url=settings.artifacts_s3_endpoint_url or None,
            region_name=settings.artifacts_s3_region or None, config=config, **credentials)

    def _key(self, key: str) -> str:
        return self.prefix + checked(key)

    def put(self, key: str, data: bytes, content_type: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        name = self._key(key)
        try:
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=name)
                if head.get("ContentLength") == len(data):
                    return
            except ClientError as exc:
                if _status(exc) != 404:
                    raise
            # The checksum makes the store refuse bytes damaged on the way.
            digest = base64.b64encode(bytes.fromhex(key.rsplit("/", 1)[1])).decode()
            self.client.put_object(Bucket=self.bucket, Key=name, Body=data,
                                   ContentType=content_type, ChecksumSHA256=digest)
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable(f"the artifact store refused the write: {exc}") from exc

    def open(self, key: str) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except ClientError as exc:
            if _status(exc) == 404 and exc.response.get("Error", {}).get("Code") != "NoSuchBucket":
                raise ArtifactMissing(key) from None
            raise StoreUnavailable(f"the artifact store refused the read: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"the artifact store is unreachable: {exc}") from exc
        return _chunks(body)


def _status(exc: Any) -> int | None:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _configured(settings: Settings) -> ArtifactStore:
    if settings.artifacts_s3_bucket:
        return S3Store(settings)
    return LocalStore(settings.data_dir / "artifacts")


def store() -> ArtifactStore:
    """The store the settings name (one per process: a boto3 client is thread-safe)."""
    with _lock:  # boto3's client creation is not
        return _configured(get_settings())
