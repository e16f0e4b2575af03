"""Pull requests through the GitHub REST API (SWITCHYARD_GITHUB_API_URL), idempotently.

Opening one looks for an open pull request of the same head first, and GitHub's "already
exists" answer resolves to that one, so a retried job never opens a second. Failures are
typed for the engine: 5xx, 429 and rate limits retry (after Retry-After when GitHub says);
other 4xx fail the job. A token is never part of an error's text.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tasks.coding.gitcmd import scrub
from tasks.coding.payloads import GITHUB_REPO
from tasks.engine.errors import PermanentError, RetryableError
from tasks.settings import get_settings

TIMEOUT = httpx.Timeout(30.0, connect=10.0)
API_VERSION = "2022-11-28"
ALREADY_EXISTS = "a pull request already exists"
MESSAGE_CAP = 500


@dataclass(frozen=True)
class PullRequest:
    url: str  # html_url: the page a person opens
    number: int
    created: bool  # False: it was open already (an earlier attempt's, or someone's)


@dataclass(frozen=True)
class PullHead:
    """Where a pull request's changes live: its branch and the repository holding it."""
    ref: str
    clone_url: str
    repo: str  # owner/name; differs from the base repository's for a fork


def open_pull_request(*, repo: str, head: str, base: str, title: str, body: str,
                      token: str, draft: bool = False) -> PullRequest:
    """The open pull request of `head` into `base` in `repo` (owner/name), opened if none is;
    `draft`: opened as a draft (a change whose verification failed)."""
    owner = _repo(repo).split("/")[0]
    existing = _open_pull(repo, owner, head, token)
    if existing is not None:
        return existing
    resp = _call("POST", f"/repos/{repo}/pulls", token, "opening a pull request",
                 json={"title": title, "head": head, "base": base, "body": body,
                       "draft": draft},
                 ok=(201, 422))
    if resp.status_code == 422:
        if ALREADY_EXISTS in _message(resp, token).lower():
            existing = _open_pull(repo, owner, head, token)
            if existing is not None:
                return existing
        raise PermanentError(f"GitHub refused the pull request (HTTP 422): "
                             f"{_message(resp, token)}")
    doc = resp.json()
    return PullRequest(url=str(doc["html_url"]), number=int(doc["number"]), created=True)


def pull_request_head(repo: str, number: int, token: str | None, *,
                      timeout: float = 30.0) -> PullHead:
    """`timeout`: seconds; a webhook answering GitHub has ten in all."""
    doc = _call("GET", f"/repos/{_repo(repo)}/pulls/{int(number)}", token,
                f"reading pull request #{number}",
                timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0))).json()
    head = doc.get("head") or {}
    head_repo = head.get("repo") or {}
    if not head_repo:
        raise PermanentError(f"pull request #{number}'s branch is gone (its fork was deleted)")
    return PullHead(ref=str(head["ref"]), clone_url=str(head_repo["clone_url"]),
                    repo=str(head_repo["full_name"]))


def default_branch(repo: str, token: str | None) -> str:
    return str(_call("GET", f"/repos/{_repo(repo)}", token, f"reading {repo}")
               .json()["default_branch"])


def _open_pull(repo: str, owner: str, head: str, token: str) -> PullRequest | None:
    found = _call("GET", f"/repos/{repo}/pulls", token, "looking for an open pull request",
                  params={"head": f"{owner}:{head}", "state": "open"}).json()
    if isinstance(found, list) and found:
        return PullRequest(url=str(found[0]["html_url"]), number=int(found[0]["number"]),
                           created=False)
    return None


def _repo(repo: str) -> str:
    if not re.fullmatch(GITHUB_REPO, repo):
        raise PermanentError(f"{repo!r} is not a GitHub repository name (owner/name)")
    return repo


def _call(method: str, path: str, token: str | None, what: str, *,
          ok: tuple[int, ...] = (200,), timeout: httpx.Timeout = TIMEOUT,
          **kwargs: Any) -> httpx.Response:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
               "User-Agent": "switchyard-agent"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    url = get_settings().github_api_url.rstrip("/") + path
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            resp = client.request(method, url, headers=headers, **kwargs)
    except httpx.TransportError as exc:
        raise RetryableError(scrub(f"GitHub did not answer {what}: {type(exc).__name__}: "
                                   f"{exc}", [token or ""])) from None
    if resp.status_code in ok:
        return resp
    raise _error(resp, token, what)


def _error(resp: httpx.Response, token: str | None, what: str) -> Exception:
    code = resp.status_code
    text = f"GitHub answered HTTP {code} {what}: {_message(resp, token)}"
    wait = _retry_after(resp)
    limited = code == 429 or (code == 403 and (wait is not None or
                                               "rate limit" in text.lower()))
    if limited:
        return RetryableError(text, delay=wait, count_attempt=False)
    if code >= 500:
        return RetryableError(text, delay=wait)
    return PermanentError(text)


def _message(resp: httpx.Response, token: str | None) -> str:
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        parts = [str(doc.get("message") or "")]
        for err in doc.get("errors") or []:
            if isinstance(err, dict) and err.get("message"):
                parts.append(str(err["message"]))
        said = "; ".join(p for p in parts if p)
    else:
        said = resp.text
    said = scrub(" ".join(said.split()), [token or ""])
    return said[:MESSAGE_CAP] or "(no message)"


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after", "").strip()
    if raw.isdigit():
        return float(raw)
    if resp.headers.get("x-ratelimit-remaining") == "0":
        reset = resp.headers.get("x-ratelimit-reset", "")
        if reset.isdigit():
            return max(1.0, float(reset) - time.time())
    return None
