"""Which GitHub token goes where: the project's own `github_token` secret; the operator's
only where the operator lends it (SWITCHYARD_SHARED_CREDENTIALS names `github`) and only
for the repositories it names (SWITCHYARD_GITHUB_SHARED_REPOS); to git only on GitHub's
hosts. One rule for clones, pushes, pull requests, the planner's tree and webhooks: a
tenant never acts with the operator's identity on a repository the operator did not name."""

from __future__ import annotations

import fnmatch
import re
from typing import Any
from urllib.parse import urlsplit

from tasks.coding import git
from tasks.engine.errors import InvalidPayload, PermanentError
from tasks.services import keystore
from tasks.settings import get_settings

SECRET = "github_token"


def github_hosts() -> set[str]:
    """Where a GitHub token may be sent: github.com, and the host of a GitHub Enterprise
    API the operator configured (its git host: `api.` dropped)."""
    host = (urlsplit(get_settings().github_api_url).hostname or "").lower()
    return {"github.com", host.removeprefix("api.")} - {""}


def operator_lends(repo: str | None) -> bool:
    """Whether the operator's token may serve `repo` (owner/name) for a tenant."""
    s = get_settings()
    if not (s.github_token and repo and "github" in s.shared_credential_kinds):
        return False
    return any(fnmatch.fnmatchcase(repo.lower(), glob) for glob in s.github_shared_repo_globs)


def pick(own: str | None, repo: str | None) -> str | None:
    """The project's own token, else the operator's where it is lent for `repo`, else None."""
    if own:
        return own
    return get_settings().github_token if operator_lends(repo) else None


def github_token(project_id: Any, repo: str | None) -> str | None:
    """The token for GitHub's API on `repo` (owner/name); never stored in a step."""
    return pick(keystore.read(str(project_id), [SECRET]).get(SECRET), repo)


def repo_of(source: git.Source) -> str | None:
    """owner/name of a clone URL on one of GitHub's hosts; None for any other source."""
    if source.kind != "https":
        return None
    parts = urlsplit(source.url)
    if (parts.hostname or "").lower() not in github_hosts():
        return None
    found = re.fullmatch(r"/([^/]+)/([^/]+?)(?:\.git)?/?", parts.path)
    return f"{found.group(1)}/{found.group(2)}" if found else None


def token_for(project_id: Any, source: git.Source) -> str | None:
    """The GitHub token for git, only for a repository on GitHub: a token sent to any host
    a tenant names is a token lost."""
    repo = repo_of(source)
    return github_token(project_id, repo) if repo else None


def require_for_pull_request(project_id: Any, repo: str) -> str:
    """The token a pull request on `repo` needs; PermanentError saying how to get one."""
    token = github_token(project_id, repo)
    if not token:
        raise PermanentError(missing(repo))
    return token


def admit_pull_request(project_id: Any, repo: str | None) -> None:
    """A client's code task that asks for a pull request with no token to open it is
    refused before it runs (422): the work would be done and then not delivered."""
    if repo and not github_token(project_id, repo):
        raise InvalidPayload(missing(repo), details={"field": "github_repo", "secret": SECRET})


def missing(repo: str) -> str:
    return (f"no GitHub token for {repo}: set the project's {SECRET!r} secret "
            f"(PUT /api/projects/<pid>/secrets/{SECRET}); the operator's token serves only "
            "the repositories SWITCHYARD_GITHUB_SHARED_REPOS names")
