"""The web UI: server-rendered page shells whose scripts call the same /api/* as any client.

Signing in turns an API token into a signed, HttpOnly, SameSite=Lax cookie session
that keeps only the token's hash (app.auth looks the owner up from it on every call,
so revoking the token signs the browser out). Pages carry no data of their own.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, redirect, render_template, request, session, url_for
from flask.sansio.blueprints import BlueprintSetupState

from app.auth import SESSION_CSRF, SESSION_TOKEN_HASH
from app.tokens import hash_token, owner_for_digest, owner_for_token
from tasks.settings import Settings, get_settings

bp = Blueprint("ui", __name__, template_folder="../templates", static_folder="../static",
               static_url_path="/assets")

SESSION_LIFETIME = timedelta(hours=12)  # sliding: every request renews it
SECRET_FILE = "web-secret-key"
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


def secret_key(settings: Settings) -> str:
    """SWITCHYARD_SECRET_KEY, else a random key made once per data dir and kept there, so
    sessions survive a restart. Several hosts behind one name must set the variable."""
    if settings.secret_key:
        return settings.secret_key
    path = Path(settings.data_dir) / SECRET_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48))
        try:
            os.link(tmp, path)  # atomic, and never replaces a key another process made first
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


@bp.record_once
def _configure_sessions(state: BlueprintSetupState) -> None:
    app: Flask = state.app
    settings = get_settings()
    app.secret_key = secret_key(settings)
    app.config.update(SESSION_COOKIE_NAME="switchyard_session", SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax",
                      SESSION_COOKIE_SECURE=settings.secure_cookies,
                      PERMANENT_SESSION_LIFETIME=SESSION_LIFETIME)


@bp.after_request
def _headers(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


@lru_cache(maxsize=64)
def _asset_version(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:10]


@bp.context_processor
def _template_helpers() -> dict[str, object]:
    def asset(filename: str) -> str:
        """A static file's URL with its content hash: cached for good, refreshed on change."""
        version = _asset_version(os.path.join(bp.static_folder or "", filename))
        return url_for("ui.static", filename=filename, v=version)

    return {"asset": asset, "server_now": datetime.now(UTC).isoformat()}


def csrf_token() -> str:
    if SESSION_CSRF not in session:
        session[SESSION_CSRF] = secrets.token_urlsafe(32)
    return str(session[SESSION_CSRF])


def signed_in() -> bool:
    digest = session.get(SESSION_TOKEN_HASH)
    if not digest:
        return False
    if owner_for_digest(str(digest)) is None:
        session.pop(SESSION_TOKEN_HASH, None)  # the token was revoked
        return False
    return True


def page(template: str, **context: object) -> str | Response:
    if not signed_in():
        return redirect(url_for("ui.home", next=request.full_path.rstrip("?")))
    return render_template(template, csrf=csrf_token(), **context)


def _safe_next(target: str | None) -> str:
    """Only a path on this site: never an open redirect."""
    if not target:
        return url_for("ui.home")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("ui.home")
    return target


@bp.get("/")
def home():
    if signed_in():
        return render_template("projects.html", csrf=csrf_token())
    return render_template("signin.html", csrf=csrf_token(), error=None,
                           next=request.args.get("next", ""))


@bp.post("/signin")
def sign_in():
    form_csrf = request.form.get("csrf", "")
    token = request.form.get("token", "").strip()
    error = None
    if not form_csrf or not secrets.compare_digest(form_csrf, session.get(SESSION_CSRF, "")):
        error = "Your sign-in form expired. Please try again."
    elif not token:
        error = "Paste an API token to sign in."
    elif owner_for_token(token) is None:
        error = "That token is not valid, or it was revoked."
    if error:
        return render_template("signin.html", csrf=csrf_token(), error=error,
                               next=request.form.get("next", "")), 401
    session.clear()  # a fresh session and CSRF token on every sign-in
    session.permanent = True
    session[SESSION_TOKEN_HASH] = hash_token(token)
    csrf_token()
    return redirect(_safe_next(request.form.get("next")), 303)


@bp.post("/signout")
def sign_out():
    if secrets.compare_digest(request.form.get("csrf", ""), session.get(SESSION_CSRF, "")):
        session.clear()
    return redirect(url_for("ui.home"), 303)


@bp.get("/projects/<pid>")
def project_page(pid: str):
    return page("project.html", project_id=pid)


@bp.get("/jobs/<jid>")
def job_page(jid: str):
    return page("job.html", job_id=jid)


@bp.get("/monitor")
def monitor_page():
    return page("monitor.html")
