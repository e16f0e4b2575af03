"""GitHub repository_dispatch: starts the workflows a repository listens for.

args: {"owner": str, "repo": str, "event_type": str, "client_payload": dict (optional)}
(or "repo": "owner/name"). GitHub takes no idempotency key and keeps no record of a
dispatch we could look up, so a crash mid-call can only end as `unknown`.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.services.effects.adapters import http
from tasks.services.effects.adapters.base import (
    Adapter,
    Credentials,
    ProviderResult,
    cannot_tell,
    not_sent,
)
from tasks.settings import get_settings

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")  # keeps the URL path ours


def target(args: dict[str, Any]) -> tuple[str, str] | None:
    owner, repo = args.get("owner"), args.get("repo")
    if owner is None and isinstance(repo, str) and repo.count("/") == 1:
        owner, repo = repo.split("/")
    if isinstance(owner, str) and isinstance(repo, str) and NAME.match(owner) \
            and NAME.match(repo) and repo not in (".", ".."):
        return owner, repo
    return None


def call(key: str, args: dict[str, Any], creds: Credentials) -> ProviderResult:
    where = target(args)
    event_type = args.get("event_type")
    payload = args.get("client_payload") or {}
    if where is None or not isinstance(event_type, str) or not event_type \
            or not isinstance(payload, dict):
        return not_sent("github_dispatch needs args.owner, args.repo, args.event_type and an "
                        "optional args.client_payload object", retryable=False)
    s = get_settings()
    token = creds.pick("github_token", s.github_token)
    if not token:
        return not_sent(creds.missing("github_token", "SWITCHYARD_GITHUB_TOKEN"),
                        retryable=False)
    owner, repo = where
    resp = http.request(
        "POST", f"{s.github_api_url.rstrip('/')}/repos/{owner}/{repo}/dispatches",
        json={"event_type": event_type, "client_payload": payload},
        headers={"Authorization": f"Bearer {token}",
                 "Accept": "application/vnd.github+json",
                 "X-GitHub-Api-Version": "2022-11-28"},
        tenant_url=False,
    )
    return resp if isinstance(resp, ProviderResult) else http.classify(resp, "GitHub")


def reconcile(key: str, args: dict[str, Any], provider_ref: str | None,
              creds: Credentials) -> ProviderResult:
    return cannot_tell("GitHub keeps no record of a repository_dispatch we could look up: "
                       "check the repository's Actions runs for this event")


ADAPTER = Adapter("github_dispatch", call, reconcile, secrets=("github_token",))
