"""The coding agent's HTTP triggers: a client's code task, and GitHub's signed webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from flask.testing import FlaskClient

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.services import keystore
from tasks.settings import get_settings
from tests.integration.jobdb import tuples
from tests.support.fake_github import TOKEN, FakeGithub, fake_github  # noqa: F401

SECRET = "whsec-test-0123456789abcdef"
REPO = "acme/widgets"
REPO_ID = 4242


def _auth(owner: str) -> dict[str, str]:
    with session_scope(session_factory()) as session:
        _, token = create_token(session, owner)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def client(db) -> FlaskClient:
    return create_app().test_client()


@pytest.fixture
def alice(client: FlaskClient) -> tuple[dict[str, str], str]:
    auth = _auth("alice")
    return auth, client.post("/api/projects", headers=auth, json={"name": "A"}).json["id"]


def _jobs(project: str) -> list[tuple[str, str, dict[str, Any], str]]:
    return [(str(r[0]), r[1], r[2], r[3]) for r in tuples(
        "SELECT id, job_type, payload, idempotency_key FROM agent_jobs WHERE project_id = %s "
        "ORDER BY created_at", (project,))]


# --- POST /api/projects/<pid>/code-tasks ------------------------------------------------

OPERATOR_TOKEN = "ghp-operator-0123456789abcdef"


@pytest.fixture
def operator_token(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SWITCHYARD_GITHUB_TOKEN", OPERATOR_TOKEN)
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()


def test_a_pull_request_needs_the_projects_token_not_the_operators(
        client, alice, operator_token, monkeypatch) -> None:
    # Given an operator with a GitHub token it does not lend (the default)
    auth, pid = alice
    body = {"repo_url": "https://github.com/victim-org/private.git", "task": "Leak it",
            "github_repo": "victim-org/private"}
    # When a project without its own token asks for a pull request
    refused = client.post(f"/api/projects/{pid}/code-tasks", headers=auth, json=body)
    # Then it is refused before anything runs, saying which secret to set
    assert refused.status_code == 422, refused.json
    error = refused.json["error"]
    assert error["code"] == "invalid_payload"
    assert error["details"] == {"field": "github_repo", "secret": "github_token"}
    assert "github_token" in error["message"] and OPERATOR_TOKEN not in refused.get_data(True)
    assert _jobs(pid) == []
    # And a lent token serves only the repositories the operator names
    monkeypatch.setenv("SWITCHYARD_SHARED_CREDENTIALS", "email,github")
    monkeypatch.setenv("SWITCHYARD_GITHUB_SHARED_REPOS", "acme/*, tools/cli")
    get_settings.cache_clear()
    again = client.post(f"/api/projects/{pid}/code-tasks", headers=auth, json=body)
    assert again.status_code == 422 and _jobs(pid) == []
    ours = {**body, "repo_url": "https://github.com/acme/widgets.git", "github_repo": REPO}
    assert client.post(f"/api/projects/{pid}/code-tasks", headers=auth,
                       json=ours).status_code == 202
    # And a task that opens no pull request needs no token
    plain = {"repo_url": "https://github.com/victim-org/public.git", "task": "Read it"}
    assert client.post(f"/api/projects/{pid}/code-tasks", headers=auth,
                       json=plain).status_code == 202

def test_a_code_task_enqueues_code_run_task_with_its_payload(client, alice) -> None:
    auth, pid = alice
    keystore.put(pid, "github_token", TOKEN)  # what its pull request will be opened with
    body = {"repo_url": "https://github.com/acme/widgets.git", "task": "Fix the README",
            "github_repo": REPO, "branch": "develop"}
    response = client.post(f"/api/projects/{pid}/code-tasks", headers=auth, json=body)
    assert response.status_code == 202, response.json
    job_id = response.json["job_id"]
    assert response.json["status_url"] == f"/api/jobs/{job_id}"
    [(jid, job_type, payload, _)] = _jobs(pid)
    assert (jid, job_type) == (job_id, "code.run_task")
    assert payload == {**body, "max_iterations": 5, "open_draft_on_failure": True}
    [(queue,)] = tuples("SELECT queue FROM agent_jobs WHERE id = %s", (job_id,))
    assert queue == "agents"


def test_the_same_idempotency_key_names_the_same_job(client, alice) -> None:
    auth, pid = alice
    body = {"repo_url": "/srv/repos/demo", "task": "t", "idempotency_key": "ticket-42"}
    first = client.post(f"/api/projects/{pid}/code-tasks", headers=auth, json=body)
    again = client.post(f"/api/projects/{pid}/code-tasks", headers=auth, json=body)
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json["job_id"] == again.json["job_id"]
    [(_, _, payload, key)] = _jobs(pid)
    assert key == "ticket-42" and "idempotency_key" not in payload


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"task": None}, "task", "field required"),
    ({"repo_url": "git@github.com:acme/widgets.git"}, "repo_url", "ssh"),
    ({"repo_url": "--upload-pack=touch /tmp/x"}, "repo_url", "starts with '-'"),
    ({"repo_url": "https://me:ghp_x@github.com/a/b"}, "repo_url", "credentials"),
    ({"branch": "a..b"}, "branch", "not a branch name"),
    ({"branch": "-f"}, "branch", "not a branch name"),
    ({"github_repo": "not a repo"}, "github_repo", "pattern"),
    ({"max_iterations": 0}, "max_iterations", "greater than or equal to 1"),
    ({"max_iterations": "3"}, "max_iterations", "valid integer"),
    ({"task": "a\u0000b"}, "task", "NUL"),
    ({"task": "   \n\t"}, "task", "must not be blank"),
    ({"surprise": 1}, "surprise", "Extra inputs"),
], ids=lambda v: str(v)[:30])
def test_bad_input_is_a_422_naming_the_field_and_writes_nothing(
        client, alice, change: dict[str, Any], field: str, says: str) -> None:
    auth, pid = alice
    body = {"repo_url": "https://github.com/acme/widgets.git", "task": "Fix it", **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = client.post(f"/api/projects/{pid}/code-tasks", headers=auth, json=body)
    assert response.status_code == 422, response.json
    fields = response.json["error"]["details"]["fields"]
    assert field in fields and says in fields[field], fields
    assert _jobs(pid) == []


@pytest.mark.parametrize("job_type", ["code.run_task", "code.generate_mvp"])
@pytest.mark.parametrize("repo_url", ["git@github.com:acme/widgets.git",
                                      "ext::sh -c touch% /tmp/pwned",
                                      "--upload-pack=touch /tmp/x"])
def test_a_bad_repo_url_is_refused_by_every_route_that_enqueues(
        client, alice, job_type: str, repo_url: str) -> None:
    # The generic job routes take the same payload: a URL that can never be cloned is a
    # 422 there too, not a job that fails at its clone step.
    auth, pid = alice
    payload = {"repo_url": repo_url, "task": "Fix it"} if job_type == "code.run_task" \
        else {"repo_url": repo_url, "description": "A site"}
    one = client.post(f"/api/projects/{pid}/jobs", headers=auth,
                      json={"job_type": job_type, "payload": payload})
    assert one.status_code == 422, one.json
    assert "repo_url" in one.json["error"]["message"], one.json
    batch = client.post(f"/api/projects/{pid}/jobs:batch", headers=auth,
                        json={"jobs": [{"job_type": job_type, "payload": payload}]})
    assert batch.status_code in (207, 422), batch.json
    assert "job_id" not in str(batch.json), batch.json
    assert _jobs(pid) == []


def test_another_owners_project_is_not_found_and_no_token_is_a_401(client, alice) -> None:
    _, pid = alice
    body = {"repo_url": "https://github.com/acme/widgets.git", "task": "t"}
    response = client.post(f"/api/projects/{pid}/code-tasks", headers=_auth("mallory"),
                           json=body)
    assert response.status_code == 404
    assert client.post(f"/api/projects/{pid}/code-tasks", json=body).status_code == 401
    assert _jobs(pid) == []


# --- POST /api/webhooks/github/<pid> ----------------------------------------------------

def _repository() -> dict[str, Any]:
    return {"id": REPO_ID, "name": "widgets", "full_name": REPO,
            "clone_url": f"https://github.com/{REPO}.git", "private": False,
            "owner": {"login": "acme"}, "default_branch": "main"}


def issue_event(action: str = "opened", *, labels: tuple[str, ...] = ("agent",),
                association: str = "MEMBER", sender: str = "octocat",
                added: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "action": action,
        "issue": {"number": 7, "title": "Login button does nothing",
                  "body": "Clicking it logs nothing.", "user": {"login": "octocat"},
                  "author_association": association, "state": "open",
                  "labels": [{"name": name, "color": "ededed"} for name in labels]},
        "repository": _repository(), "sender": {"login": sender},
    }
    if added is not None:
        doc["label"] = {"name": added}
    return doc


def comment_event(body: str, *, number: int, association: str = "COLLABORATOR",
                  comment_id: int = 991) -> dict[str, Any]:
    return {"action": "created",
            "issue": {"number": number, "title": "Add the login page", "user": {"login": "x"},
                      "pull_request": {"url": f"https://api.github.com/repos/{REPO}/pulls/"
                                              f"{number}"}},
            "comment": {"id": comment_id, "body": body, "user": {"login": "reviewer"},
                        "author_association": association},
            "repository": _repository(), "sender": {"login": "reviewer"}}


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(client: FlaskClient, pid: str, event: str, doc: dict[str, Any], *,
            delivery: str | None = None, signature: str | None = None,
            form: bool = False) -> Any:
    text = json.dumps(doc)
    raw = urlencode({"payload": text}).encode() if form else text.encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
               "X-Hub-Signature-256": signature if signature is not None else sign(raw),
               "Content-Type": "application/x-www-form-urlencoded" if form
               else "application/json", "User-Agent": "GitHub-Hookshot/abc"}
    return client.post(f"/api/webhooks/github/{pid}", data=raw, headers=headers)


@pytest.fixture
def hooked(alice) -> str:
    _, pid = alice
    keystore.put(pid, "github_webhook_secret", SECRET)
    keystore.put(pid, "github_token", TOKEN)
    return pid


def test_a_wrong_missing_or_unknown_signature_is_a_401_and_no_job(client, alice, hooked):
    doc = issue_event()
    answers = [
        deliver(client, hooked, "issues", doc, signature="sha256=" + "0" * 64),
        deliver(client, hooked, "issues", doc, signature=""),
        deliver(client, hooked, "issues", doc, signature=sign(b"another body")),
        deliver(client, hooked, "issues", doc,
                signature=sign(json.dumps(doc).encode(), "not-the-secret")),
        # A project that does not exist, and one without the secret: the same answer
        deliver(client, str(uuid.uuid4()), "issues", doc),
        deliver(client, "not-a-uuid", "issues", doc),
    ]
    _, unhooked = alice[0], client.post("/api/projects", headers=alice[0],
                                        json={"name": "B"}).json["id"]
    answers.append(deliver(client, unhooked, "issues", doc))
    assert [a.status_code for a in answers] == [401] * len(answers)
    assert len({json.dumps(a.json) for a in answers}) == 1  # nothing tells them apart
    assert answers[0].json["error"]["code"] == "bad_signature"
    assert _jobs(hooked) == [] and _jobs(unhooked) == []


def test_a_ping_is_answered_and_starts_nothing(client, hooked) -> None:
    response = deliver(client, hooked, "ping", {"zen": "Design for failure.", "hook_id": 1})
    assert response.status_code == 204 and response.headers["X-Switchyard-Ignored"] == "ping"
    assert _jobs(hooked) == []


def test_an_issue_labelled_agent_starts_one_job_however_often_it_arrives(
        client, hooked, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    delivery = str(uuid.uuid4())
    first = deliver(client, hooked, "issues", issue_event(), delivery=delivery)
    assert first.status_code == 202, first.json
    [(job_id, job_type, payload, key)] = _jobs(hooked)
    assert (first.json["job_id"], job_type) == (job_id, "code.run_task")
    assert payload == {"repo_url": f"https://github.com/{REPO}.git", "github_repo": REPO,
                       "task": "#7 Login button does nothing\n\nClicking it logs nothing.",
                       "branch": None, "max_iterations": 5, "open_draft_on_failure": True}
    assert key == f"github:issue:{REPO_ID}:7"

    # GitHub redelivers it, and sends `labeled` too for a label given at creation
    again = deliver(client, hooked, "issues", issue_event(), delivery=delivery)
    twin = deliver(client, hooked, "issues", issue_event("labeled", added="agent"))
    assert (again.status_code, twin.status_code) == (200, 200)
    assert again.json["job_id"] == twin.json["job_id"] == job_id
    assert len(_jobs(hooked)) == 1
    # Neither the body nor the signature reaches the log
    assert "Clicking it logs nothing" not in caplog.text and "sha256=" not in caplog.text


def test_a_form_encoded_delivery_works_too(client, hooked) -> None:
    response = deliver(client, hooked, "issues", issue_event(), form=True)
    assert response.status_code == 202 and len(_jobs(hooked)) == 1


def test_a_maintainer_labelling_a_strangers_issue_starts_a_job(client, hooked) -> None:
    doc = issue_event("labeled", labels=("bug", "agent"), association="NONE",
                      sender="maintainer", added="agent")
    assert deliver(client, hooked, "issues", doc).status_code == 202


@pytest.mark.parametrize(("event", "doc", "why"), [
    ("issues", issue_event(labels=("bug",)), "no 'agent' label"),
    ("issues", issue_event(association="NONE"), "not a collaborator"),
    ("issues", issue_event("labeled", labels=("agent", "bug"), added="bug"), "is not 'agent'"),
    ("issues", issue_event("labeled", association="CONTRIBUTOR", added="agent"),
     "not a collaborator"),
    ("issues", issue_event("closed"), "issues.closed"),
    ("issue_comment", comment_event("/agent fix it", number=3, association="NONE"),
     "not a collaborator"),
    ("issue_comment", comment_event("please /agent fix", number=3), "not a '/agent fix'"),
    ("issue_comment", comment_event("/agent fixes", number=3), "not a '/agent fix'"),
    ("issue_comment", {**comment_event("/agent fix", number=3),
                       "issue": {"number": 3, "title": "An issue"}}, "not a pull request"),
    ("push", {"ref": "refs/heads/main", "repository": _repository()}, "push events"),
    ("issues", {"action": "opened"}, "lacks fields"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_events_that_ask_nothing_of_the_agent_start_nothing(
        client, hooked, event: str, doc: dict[str, Any], why: str) -> None:
    response = deliver(client, hooked, event, doc)
    assert response.status_code == 204
    assert why in response.headers["X-Switchyard-Ignored"]
    assert _jobs(hooked) == []


@pytest.fixture
def gh(fake_github: FakeGithub, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
       hooked: str) -> Iterator[FakeGithub]:
    monkeypatch.setenv("SWITCHYARD_GITHUB_API_URL", fake_github.url)
    get_settings.cache_clear()
    keystore.put(hooked, "github_token", TOKEN)
    yield fake_github
    monkeypatch.undo()
    get_settings.cache_clear()


def test_a_webhook_of_a_project_without_a_token_never_borrows_the_operators(
        client, alice, fake_github, monkeypatch) -> None:  # noqa: F811
    # Given a project whose webhook is set but which has no GitHub token of its own, on a
    # server whose operator has one (not lent)
    _, pid = alice
    keystore.put(pid, "github_webhook_secret", SECRET)
    monkeypatch.setenv("SWITCHYARD_GITHUB_API_URL", fake_github.url)
    monkeypatch.setenv("SWITCHYARD_GITHUB_TOKEN", OPERATOR_TOKEN)
    get_settings.cache_clear()
    gh = fake_github
    other = gh.add_pull(REPO, head="feature/y")
    # When a comment asks the agent to fix a pull request
    response = deliver(client, pid, "issue_comment",
                       comment_event("/agent fix", number=other["number"], comment_id=7))
    # Then GitHub was asked without the operator's token, and no job that could not deliver
    # its work was started
    assert all(seen.authorization != f"Bearer {OPERATOR_TOKEN}" for seen in gh.requests())
    assert gh.requests(), "the pull request was looked up"
    assert response.status_code in (422, 502), response.json
    assert _jobs(pid) == []
    monkeypatch.undo()
    get_settings.cache_clear()


def test_agent_fix_on_a_pull_request_works_on_its_branch(client, hooked, gh) -> None:
    pull = gh.add_pull(REPO, head="feature/login", title="Add the login page")
    doc = comment_event("/agent fix the failing test in test_login.py", number=pull["number"])
    response = deliver(client, hooked, "issue_comment", doc)
    assert response.status_code == 202, response.json
    [(_, _, payload, key)] = _jobs(hooked)
    assert payload["branch"] == "feature/login" and payload["github_repo"] == REPO
    assert payload["task"] == ("the failing test in test_login.py\n\n"
                               f"Pull request #{pull['number']}: Add the login page")
    assert key == "github:comment:991"
    [read] = gh.requests("GET", f"/repos/{REPO}/pulls/{pull['number']}")
    assert read.authorization == f"Bearer {TOKEN}"  # the project's github_token
    again = deliver(client, hooked, "issue_comment", doc)
    assert again.status_code == 200 and len(_jobs(hooked)) == 1


def test_agent_fix_on_a_fork_or_with_github_down_starts_nothing(client, hooked, gh) -> None:
    fork = gh.add_pull(REPO, head="patch-1", head_repo="stranger/widgets")
    response = deliver(client, hooked, "issue_comment",
                       comment_event("/agent fix", number=fork["number"]))
    assert response.status_code == 204 and "fork" in response.headers["X-Switchyard-Ignored"]

    pull = gh.add_pull(REPO, head="feature/x")
    gh.script("GET", f"/repos/{REPO}/pulls/{pull['number']}", 502, {"message": "bad gateway"})
    response = deliver(client, hooked, "issue_comment",
                       comment_event("/agent fix", number=pull["number"], comment_id=5))
    assert response.status_code == 502
    assert response.json["error"]["code"] == "github_error"
    assert response.headers["Retry-After"] == "60"  # a passing cause: GitHub redelivers
    assert TOKEN not in response.get_data(as_text=True)
    assert _jobs(hooked) == []


def test_an_oversized_or_malformed_delivery_is_refused(client, hooked) -> None:
    big = b'{"pad": "' + b"x" * (1024 * 1024) + b'"}'
    response = client.post(f"/api/webhooks/github/{hooked}", data=big, headers={
        "X-GitHub-Event": "issues", "X-Hub-Signature-256": sign(big),
        "Content-Type": "application/json"})
    assert response.status_code == 413
    raw = b"[1, 2"
    response = client.post(f"/api/webhooks/github/{hooked}", data=raw, headers={
        "X-GitHub-Event": "issues", "X-Hub-Signature-256": sign(raw),
        "Content-Type": "application/json"})
    assert response.status_code == 400 and _jobs(hooked) == []
