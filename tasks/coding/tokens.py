"""Which GitHub token goes where: the project's own, else the operator's, and to git only on
GitHub's hosts (the coding agent's clones and pushes, the planner's file tree)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tasks.coding import git
from tasks.services import keystore
from tasks.settings import get_settings


def github_hosts() -> set[str]:
    """Where a GitHub token may be sent: github.com, and the host of a GitHub Enterprise
    API the operator configured (its git host: `api.` dropped)."""
    host = (urlsplit(get_settings().github_api_url).hostname or "").lower()
    return {"github.com", host.removeprefix("api.")} - {""}


def github_token(project_id: Any) -> str | None:
    """The project's own GitHub token, else the operator's; never stored in a step. For the
    API the operator configured (pull requests), and for git only through `token_for`."""
    return keystore.read(str(project_id), ["github_token"]).get("github_token") \
        or get_settings().github_token or None


def token_for(project_id: Any, source: git.Source) -> str | None:
    """The GitHub token for git, only for a repository on GitHub: a token sent to any host
    a tenant names is a token lost."""
    if source.kind != "https" or \
            (urlsplit(source.url).hostname or "").lower() not in github_hosts():
        return None
    return github_token(project_id)
