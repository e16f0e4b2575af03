"""A job's artifacts: listed by the owner, downloaded by the owner, never rendered as a page.

Only images and PDFs are shown inline; anything else (HTML, SVG, scripts, text) is sent as
an attachment with `nosniff` and a sandboxing CSP, so a file a job wrote from tenant input
can never run as this origin's page.
"""

from __future__ import annotations

import logging
import unicodedata
from typing import Any
from urllib.parse import quote

from flask import Blueprint, Response, jsonify
from werkzeug.http import dump_options_header

from app.api.queries import (
    artifact_for_owner,
    artifacts_of,
    job_for_owner,
    recent_artifacts,
    require_project,
)
from app.api.schemas import iso
from app.http import db
from app.http.auth import current_owner
from app.http.errors import ApiError, not_found
from models import Artifact
from tasks.services.artifact_store import ArtifactMissing, StoreUnavailable, store

log = logging.getLogger(__name__)
bp = Blueprint("artifacts", __name__)

# Shown in the browser; everything else is a download. Not SVG: it can carry script.
INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"})
SANDBOX = "default-src 'none'; sandbox"


def artifact_json(a: Artifact) -> dict[str, Any]:
    return {"id": str(a.id), "kind": a.kind, "name": a.name, "content_type": a.content_type,
            "size": a.size, "sha256": a.sha256, "url": f"/api/artifacts/{a.id}"}


@bp.get("/api/projects/<pid>/artifacts")
def list_project_artifacts(pid: str):
    session = db.session()
    project = require_project(session, current_owner(), pid)
    return jsonify({"items": [{**artifact_json(a), "job_id": str(a.job_id),
                               "created_at": iso(a.created_at)}
                              for a in recent_artifacts(session, project.id)]})


@bp.get("/api/jobs/<jid>/artifacts")
def list_artifacts(jid: str):
    session = db.session()
    job = job_for_owner(session, current_owner(), jid)
    if job is None:
        raise not_found("job")
    return jsonify({"items": [artifact_json(a) for a in artifacts_of(session, job.id)]})


def disposition(name: str, inline: bool) -> str:
    """RFC 6266: an ASCII fallback, and the exact name as UTF-8 when it is not ASCII."""
    names = {"filename": name}
    try:
        name.encode("ascii")
    except UnicodeEncodeError:
        ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
        names = {"filename": ascii_name or "download",
                 "filename*": "UTF-8''" + quote(name, safe="!#$&+^`|~")}
    return dump_options_header("inline" if inline else "attachment", names)


@bp.get("/api/artifacts/<artid>")
def download_artifact(artid: str):
    artifact = artifact_for_owner(db.session(), current_owner(), artid)
    if artifact is None:
        raise not_found("artifact")
    db.release()  # the bytes may take a while: hold no connection meanwhile
    try:
        chunks = store().open(artifact.storage_key)
    except ArtifactMissing:
        log.error("artifact bytes missing", extra={"action": "artifact_missing",
                                                   "artifact_id": str(artifact.id)})
        raise ApiError(404, "artifact_missing", "the artifact's bytes are no longer in the "
                       "store") from None
    except StoreUnavailable as exc:
        log.warning("artifact store unavailable: %s", exc,
                    extra={"action": "artifact_store_unavailable"})
        raise ApiError(503, "artifact_store_unavailable", "the artifact store cannot be "
                       "reached for the moment", headers={"Retry-After": "5"}) from None
    inline = artifact.content_type.split(";")[0] in INLINE
    headers = {"Content-Length": str(artifact.size),
               "Content-Disposition": disposition(artifact.name, inline),
               "X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-cache",
               "ETag": f'"{artifact.sha256}"'}
    if artifact.content_type != "application/pdf":  # browsers' PDF viewers refuse a sandbox
        headers["Content-Security-Policy"] = SANDBOX
    return Response(chunks, content_type=artifact.content_type, headers=headers,
                    direct_passthrough=True)
