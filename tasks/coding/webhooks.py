"""GitHub webhook deliveries to coding tasks: the signature check, and which events start one.

An issue labelled `agent` (opened with it, or given it) and a `/agent fix` comment on a pull
request start a `code.run_task`; everything else is ignored with a reason. Only people with
a say over the repository can start one: GitHub's author_association of the issue or the
comment must be OWNER, MEMBER or COLLABORATOR, or the label was added by someone other than
the issue's author (labelling needs triage rights).

Idempotency is per thing, not per delivery: an issue opened with the label arrives twice
(`opened`, then `labeled`), so one issue starts one job (`github:issue:<repo id>:<number>`),
and one comment one job (`github:comment:<id>`); a redelivery maps to the same key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from tasks.coding import github
from tasks.coding.github import PullHead
from tasks.coding.gitsource import url_problem
from tasks.coding.payloads import GITHUB_REPO, RunTaskPayload, _branch
from tasks.engine.errors import RetryableError, SwitchyardError

LABEL = "agent"
COMMAND = "/agent fix"
TRUSTED = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
TASK_MAX: int = next(m.max_length for m in RunTaskPayload.model_fields["task"].metadata
                     if hasattr(m, "max_length"))

PullLookup = Callable[[str, int], PullHead]


class PullRequestUnreadable(SwitchyardError):
    """GitHub did not tell a comment's pull request: the delivery fails with a 502 (and a
    Retry-After when the cause may pass), so GitHub shows it failed and it can be redelivered."""

    http_status = 502
    code = "github_error"

    def __init__(self, cause: SwitchyardError):
        super().__init__(f"could not read the pull request from GitHub: {cause}")
        self.passing = isinstance(cause, RetryableError)

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "60"} if self.passing else {}


def github_lookup(token: Callable[[str], str | None], *, timeout: float) -> PullLookup:
    """A pull request's head as GitHub tells it, within `timeout` seconds, with the token
    `token(repo)` gives (tasks.coding.tokens.pick: the operator's only where it is lent)."""

    def lookup(repo: str, number: int) -> PullHead:
        try:
            return github.pull_request_head(repo, number, token(repo), timeout=timeout)
        except SwitchyardError as exc:
            raise PullRequestUnreadable(exc) from None

    return lookup


@dataclass(frozen=True)
class Trigger:
    payload: dict[str, Any]  # code.run_task's
    idempotency_key: str


@dataclass(frozen=True)
class Ignored:
    reason: str  # ASCII: it goes back in a header


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """Whether `header` is GitHub's X-Hub-Signature-256 of `body` under `secret`."""
    if not secret or not header:
        return False
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode("utf-8", "replace"))


def parse(body: bytes, mimetype: str) -> dict[str, Any]:
    """The delivery's JSON, sent as application/json or as a form's `payload` field (the
    content type a webhook gets unless its owner picks JSON). ValueError when it is neither."""
    if mimetype == "application/x-www-form-urlencoded":
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
        text = fields.get("payload", [""])[0]
    else:
        text = body.decode("utf-8")
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("the delivery is not a JSON object")
    return doc


def trigger_for(event: str, doc: dict[str, Any], *, pull_head: PullLookup) -> Trigger | Ignored:
    """What a delivery of `event` asks of the agent. `pull_head` reads a pull request's
    branch from GitHub (only called for an `/agent fix` comment by a trusted author)."""
    try:
        if event == "issues":
            return _issue(doc)
        if event == "issue_comment":
            return _comment(doc, pull_head)
    except (KeyError, TypeError, ValueError, AttributeError):
        return Ignored(f"the {event} delivery lacks fields GitHub sends")
    if event == "ping":
        return Ignored("ping")
    return Ignored(f"{event or 'unnamed'} events start nothing")


def _repository(doc: dict[str, Any]) -> tuple[str, str, int] | Ignored:
    repo = doc["repository"]
    full_name, clone_url = str(repo["full_name"]), str(repo["clone_url"])
    if not re.fullmatch(GITHUB_REPO, full_name) or url_problem(clone_url) \
            or not clone_url.startswith("https://"):
        return Ignored("the repository's name or clone URL is not one the agent accepts")
    return full_name, clone_url, int(repo["id"])


def _issue(doc: dict[str, Any]) -> Trigger | Ignored:
    action, issue = doc.get("action"), doc["issue"]
    labels = {str(label["name"]) for label in issue.get("labels") or []}
    trusted = issue.get("author_association") in TRUSTED
    if action == "opened":
        if LABEL not in labels:
            return Ignored(f"the issue has no '{LABEL}' label")
        if not trusted:
            return Ignored("the issue's author is not a collaborator of the repository")
    elif action == "labeled":
        if (doc.get("label") or {}).get("name") != LABEL:
            return Ignored(f"the label added is not '{LABEL}'")
        labeller = (doc.get("sender") or {}).get("login")
        if labeller == (issue.get("user") or {}).get("login") and not trusted:
            return Ignored("the issue's author, not a collaborator, labelled it")
    else:
        return Ignored(f"issues.{action} starts nothing")
    repo = _repository(doc)
    if isinstance(repo, Ignored):
        return repo
    full_name, clone_url, repo_id = repo
    number = int(issue["number"])
    task = f"#{number} {issue['title']}\n\n{issue.get('body') or ''}".strip()
    return Trigger({"repo_url": clone_url, "task": task[:TASK_MAX], "github_repo": full_name},
                   f"github:issue:{repo_id}:{number}")


def _comment(doc: dict[str, Any], pull_head: PullLookup) -> Trigger | Ignored:
    issue, comment = doc["issue"], doc["comment"]
    if doc.get("action") != "created":
        return Ignored(f"issue_comment.{doc.get('action')} starts nothing")
    if not issue.get("pull_request"):
        return Ignored("the comment is on an issue, not a pull request")
    text = str(comment.get("body") or "").strip()
    if not (text == COMMAND or (text.startswith(COMMAND) and text[len(COMMAND)].isspace())):
        return Ignored(f"the comment is not a '{COMMAND}' command")
    if comment.get("author_association") not in TRUSTED:
        return Ignored("the comment's author is not a collaborator of the repository")
    repo = _repository(doc)
    if isinstance(repo, Ignored):
        return repo
    full_name, clone_url, _ = repo
    number = int(issue["number"])
    head = pull_head(full_name, number)
    if head.repo.lower() != full_name.lower():
        return Ignored("the pull request's branch is in a fork; the agent works on branches "
                       "of the repository itself")
    try:
        _branch(head.ref)
    except ValueError:
        return Ignored("the pull request's branch name is not one the agent accepts")
    asked = text[len(COMMAND):].strip()
    task = f"{asked}\n\nPull request #{number}: {issue['title']}" if asked \
        else f"Fix pull request #{number}: {issue['title']}"
    return Trigger({"repo_url": clone_url, "task": task[:TASK_MAX], "branch": head.ref,
                    "github_repo": full_name}, f"github:comment:{int(comment['id'])}")
