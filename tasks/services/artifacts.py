"""Files a job produces, written as a step: `artifacts.write(ctx, kind=..., name=..., ...)`.

The step stores the bytes (content-addressed: the same bytes once) and upserts the row
(one per job, step and name), so a step run again after a crash changes nothing; a
replayed step returns the recorded id without touching the store. The `artifact` event
is written with the step's outcome, in one transaction, and only by the run that did it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from typing import TYPE_CHECKING, Any

from tasks.engine import pg
from tasks.engine.errors import PermanentError
from tasks.services import quotas
from tasks.services.artifact_store import storage_key, store
from tasks.settings import get_settings

if TYPE_CHECKING:
    from tasks.engine.context import JobContext

KIND = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
KIND_RULE = "1-32 characters: a lowercase letter, then lowercase letters, digits, _ . or -"
# type/subtype, optionally one charset parameter: nothing a header could be smuggled in.
CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
                          r"(; ?charset=[a-z0-9_.:-]{1,40})?")
NAME_MAX = 200

UPSERT = """
INSERT INTO artifacts (id, project_id, job_id, step_seq, step_name, kind, name, content_type,
                       size, sha256, storage_key)
VALUES (%(id)s, %(project)s, %(job)s, %(seq)s, %(step)s, %(kind)s, %(name)s, %(type)s, %(size)s,
        %(sha)s, %(key)s)
ON CONFLICT (job_id, step_seq, name) DO UPDATE SET
  kind = EXCLUDED.kind, content_type = EXCLUDED.content_type, size = EXCLUDED.size,
  sha256 = EXCLUDED.sha256, storage_key = EXCLUDED.storage_key
RETURNING id
"""


class InvalidArtifact(PermanentError):
    """A handler asked to write something no artifact may be (a bad kind, type, name, size)."""


def safe_name(name: str) -> str:
    """A file name fit for a download: the last path component, no control characters or
    quotes, at most NAME_MAX characters; names come from handlers, often from tenant input."""
    base = re.split(r"[/\\]", unicodedata.normalize("NFC", name))[-1]
    cleaned = "".join(c if c == " " or (unicodedata.category(c)[0] not in "CZ" and c != '"')
                      else "_" for c in base).strip(" .")
    if not cleaned:
        raise InvalidArtifact(f"artifact name {name!r} has no usable file name in it")
    return cleaned[:NAME_MAX]


def _validated(kind: str, name: str, content_type: str, data: bytes) -> tuple[str, str, str]:
    if not KIND.fullmatch(kind):
        raise InvalidArtifact(f"artifact kind {kind!r}: {KIND_RULE}")
    ctype = content_type.strip().lower()
    if not CONTENT_TYPE.fullmatch(ctype):
        raise InvalidArtifact(f"artifact content type {content_type!r} is not type/subtype")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArtifact(f"artifact data must be bytes, not {type(data).__name__}")
    limit = get_settings().artifact_max_bytes
    if len(data) > limit:
        raise InvalidArtifact(f"artifact {name!r} is {len(data)} bytes; at most {limit} "
                              "(SWITCHYARD_ARTIFACT_MAX_BYTES)")
    return kind, safe_name(name), ctype


def write(ctx: JobContext, *, kind: str, name: str, content_type: str, data: bytes) -> str:
    """Store a file the job produced, as the step `artifact:<name>`; returns its id."""
    kind, name, content_type = _validated(kind, name, content_type, data)
    replayed = ctx.replaying  # the step below is recorded: its event was written then
    step = f"artifact:{name}"
    artifact = ctx.step(step, store_file, ctx, step, kind, name, content_type, bytes(data))
    if not replayed:
        ctx.emit("artifact", f"artifact {name}", {
            k: artifact[k] for k in ("id", "kind", "name", "content_type", "size")})
    return str(artifact["id"])


def store_file(ctx: JobContext, step: str, kind: str, name: str, content_type: str,
               payload: bytes) -> dict[str, Any]:
    """The bytes stored and their row written under the step running now (inside a step:
    a repeat after a crash overwrites the same row)."""
    seq = ctx.current_step
    digest = hashlib.sha256(payload).hexdigest()
    key = storage_key(ctx.project_id, digest)
    quotas.check(quotas.ARTIFACT_BYTES, project=ctx.project_id, adding=len(payload))
    store().put(key, payload, content_type)
    row = pg.persist_one(UPSERT, {
        "id": uuid.uuid4(), "project": ctx.project_id, "job": ctx.job_id, "seq": seq,
        "step": step, "kind": kind, "name": name, "type": content_type,
        "size": len(payload), "sha": digest, "key": key})
    assert row is not None  # RETURNING: the insert or the update gives the row
    return {"id": str(row["id"]), "kind": kind, "name": name, "content_type": content_type,
            "size": len(payload), "sha256": digest}
