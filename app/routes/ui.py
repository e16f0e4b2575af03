"""The web UI: server-rendered page shells whose scripts call the same /api/* as any client.

Signing in turns an API token into a signed, HttpOnly, SameSite=Lax cookie session
that keeps only the token's hash and a session id (app.http.auth looks the owner up from
them on every call, so revoking the token signs the browser out, and signing out
ends every copy of the cookie: app.http.web_sessions). Pages carry no data of their own.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, redirect, render_template, request, session, url_for
from flask.sansio.blueprints import BlueprintSetupState

from app.http.auth import SESSION_CSRF, SESSION_TOKEN_HASH, authenticate, csrf_matches
from app.http.cookie_sessions import CookieSessions
from app.http.errors import ApiError
from app.http.tokens import caller_for_digest, hash_token
from app.http.web_sessions import SESSION_ID, caller_for_session
from app.http.web_sessions import end as end_session
from app.http.web_sessions import new_id as new_session_id
from tasks.services.effects import policy
from tasks.services.keys import derived_key
from tasks.services.llm.flow import project_choices
from tasks.settings import get_settings

bp = Blueprint("ui", __name__, template_folder="../templates", static_folder="../static",
               static_url_path="/assets")

SESSION_LIFETIME = timedelta(hours=12)  # sliding: every request renews it
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


@bp.record_once
def _configure_sessions(state: BlueprintSetupState) -> None:
    app: Flask = state.app
    settings = get_settings()
    # Its own key, derived: the cookie signer never holds the master secret (tasks.services.keys).
    app.secret_key = derived_key(settings, "web-session/v1").hex()
    app.session_interface = CookieSessions()
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


@lru_cache(maxsize=1)
def assets_version() -> str:
    """One hash over every static file, a directory in every asset's URL (/assets/<it>/ui.js).
    A module's relative imports (`./ui.js`) resolve under the version of the URL it came from,
    so a change to any file gives all of them new URLs, and no page mixes old and new modules."""
    root = Path(bp.static_folder or "")
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(root).as_posix()}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


@bp.get("/assets/<version>/<path:filename>")
def versioned_asset(version: str, filename: str) -> Response:
    """A static file, cached for good under the current version. Another version (a page
    opened before a deploy) gets today's file, revalidated on every use instead."""
    response = bp.send_static_file(filename)
    if version == assets_version():
        response.cache_control.no_cache = None
        response.cache_control.public = True
        response.cache_control.max_age = 365 * 24 * 3600
        response.cache_control.immutable = True
    else:
        response.cache_control.no_cache = True
    return response


@bp.context_processor
def _template_helpers() -> dict[str, object]:
    def asset(filename: str) -> str:
        """A static file's URL under the version of all of them (see assets_version)."""
        return url_for("ui.versioned_asset", version=assets_version(), filename=filename)

    return {"asset": asset, "server_now": datetime.now(UTC).isoformat()}


def csrf_token() -> str:
    if SESSION_CSRF not in session:
        session[SESSION_CSRF] = secrets.token_urlsafe(32)
    return str(session[SESSION_CSRF])


def signed_in() -> bool:
    digest = session.get(SESSION_TOKEN_HASH)
    if not digest:
        return False
    if caller_for_session(str(digest), session.get(SESSION_ID)) is None:
        session.pop(SESSION_TOKEN_HASH, None)  # the token was revoked or the session ended
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
    error, status, headers = None, 401, {}
    if not csrf_matches(form_csrf):
        error = "Your sign-in form expired. Please try again."
    elif not token:
        error = "Paste an API token to sign in."
    else:
        try:
            if authenticate(hash_token(token)) is None:
                error = "That token is not valid, or it was revoked."
        except ApiError as refused:  # too many failures from this address
            error = f"Too many failed sign-ins. Try again in {refused.headers['Retry-After']} s."
            status, headers = refused.status, refused.headers
    if error:
        return render_template("signin.html", csrf=csrf_token(), error=error,
                               next=request.form.get("next", "")), status, headers
    session.clear()  # a fresh session and CSRF token on every sign-in
    session.permanent = True
    session[SESSION_TOKEN_HASH] = hash_token(token)
    session[SESSION_ID] = new_session_id()
    csrf_token()
    return redirect(_safe_next(request.form.get("next")), 303)


@bp.post("/signout")
def sign_out():
    if not csrf_matches(request.form.get("csrf", "")):
        # Not a quiet redirect: the person must not believe they signed out.
        return Response("This sign-out form expired: reload the page and sign out again.\n",
                        403, mimetype="text/plain")
    end_session(session.get(SESSION_ID))  # copies of the cookie too
    session.clear()
    return redirect(url_for("ui.home"), 303)


@bp.get("/projects/<pid>")
def project_page(pid: str):
    return page("project.html", project_id=pid, effect_kinds=policy.choices(policy.operator()),
                llm_models=project_choices,  # called by the template: only once signed in
                code_network_offered=get_settings().code_network_allowed)


@bp.get("/jobs/<jid>")
def job_page(jid: str):
    return page("job.html", job_id=jid)


@bp.get("/workflow-runs/<jid>")
def workflow_run_page(jid: str):
    return page("workflow_run.html", job_id=jid)


@bp.get("/plans/<plan_id>")
def plan_page(plan_id: str):
    return page("plan.html", plan_id=plan_id)


@bp.get("/monitor")
def monitor_page():
    # The same flag the API routes read: the signed-in token's own (app.http.auth.current_viewer).
    caller = caller_for_digest(str(session.get(SESSION_TOKEN_HASH, "")))
    return page("monitor.html", scope="fleet" if caller is not None and caller.admin else "owner")
