"""Pull requests through the GitHub REST API, against a local fake speaking that API."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tasks.coding import github
from tasks.engine.errors import PermanentError, RetryableError
from tasks.settings import get_settings
from tests.support.fake_github import TOKEN, FakeGithub, fake_github  # noqa: F401

REPO = "acme/widgets"


@pytest.fixture
def gh(fake_github: FakeGithub, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGithub]:  # noqa: F811
    monkeypatch.setenv("SWITCHYARD_GITHUB_API_URL", fake_github.url)
    get_settings.cache_clear()
    yield fake_github
    monkeypatch.undo()
    get_settings.cache_clear()


def _open(**overrides: str) -> github.PullRequest:
    args = {"repo": REPO, "head": "switchyard/0f1e2d3c-fix", "base": "main",
            "title": "Fix the README", "body": "Done by the agent.", "token": TOKEN}
    return github.open_pull_request(**{**args, **overrides})


def test_a_pull_request_is_opened_once_however_often_it_is_asked_for(gh: FakeGithub) -> None:
    first = _open()
    assert first.created and first.number == 1
    assert first.url == f"https://github.com/{REPO}/pull/1"
    [post] = gh.requests("POST")
    assert post.path == f"/repos/{REPO}/pulls" and post.authorization == f"Bearer {TOKEN}"
    assert post.body == {"title": "Fix the README", "head": "switchyard/0f1e2d3c-fix",
                         "base": "main", "body": "Done by the agent.", "draft": False}
    lookup = gh.requests("GET")[0]
    assert lookup.query == {"head": "acme:switchyard/0f1e2d3c-fix", "state": "open"}

    again = _open()  # a retried step
    assert again == github.PullRequest(first.url, first.number, created=False)
    assert len(gh.requests("POST")) == 1


def test_githubs_already_exists_answer_resolves_to_that_pull_request(gh: FakeGithub) -> None:
    # Given a pull request the lookup does not see yet (opened a moment ago, say)
    existing = gh.add_pull(REPO, head="switchyard/0f1e2d3c-fix")
    gh.script("GET", f"/repos/{REPO}/pulls", 200, [])
    # When opening one: GitHub answers 422 "A pull request already exists"
    pull = _open()
    # Then that is the one, not an error
    assert (pull.number, pull.created) == (existing["number"], False)
    assert [r.method for r in gh.requests()] == ["GET", "POST", "GET"]


def test_other_refusals_fail_for_good_saying_why(gh: FakeGithub) -> None:
    gh.script("POST", f"/repos/{REPO}/pulls", 422, {
        "message": "Validation Failed", "errors": [
            {"resource": "PullRequest", "code": "custom",
             "message": "No commits between main and switchyard/0f1e2d3c-fix"}]})
    with pytest.raises(PermanentError, match="No commits between main"):
        _open()
    with pytest.raises(PermanentError, match=r"HTTP 401.*Bad credentials"):
        _open(token="ghp_wrongToken_zzzzzzzzzzzzzzzz")


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_retried_and_never_carry_the_token(gh: FakeGithub, status: int) -> None:
    # A careless proxy echoing the request's credentials in its error page
    gh.script("GET", f"/repos/{REPO}/pulls", status,
              {"message": f"upstream failed for Authorization: Bearer {TOKEN}"})
    with pytest.raises(RetryableError) as caught:
        _open()
    assert TOKEN not in str(caught.value) and f"HTTP {status}" in str(caught.value)
    assert caught.value.count_attempt


def test_a_rate_limit_waits_as_long_as_github_says_without_spending_an_attempt(
        gh: FakeGithub) -> None:
    gh.script("POST", f"/repos/{REPO}/pulls", 429, {"message": "slow down"},
              {"Retry-After": "7"})
    with pytest.raises(RetryableError) as caught:
        _open()
    assert caught.value.delay == 7.0 and not caught.value.count_attempt
    gh.script("GET", f"/repos/{REPO}/pulls", 403,
              {"message": "API rate limit exceeded for installation"},
              {"X-RateLimit-Remaining": "0"})
    with pytest.raises(RetryableError, match="rate limit"):
        _open()


def test_an_unreachable_api_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("SWITCHYARD_GITHUB_API_URL", f"http://127.0.0.1:{port}")
    get_settings.cache_clear()
    try:
        with pytest.raises(RetryableError, match="GitHub did not answer"):
            _open()
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_a_pull_requests_head_and_a_repositorys_default_branch(gh: FakeGithub) -> None:
    pull = gh.add_pull(REPO, head="feature/login", title="Login")
    fork = gh.add_pull(REPO, head="patch-1", head_repo="stranger/widgets")
    head = github.pull_request_head(REPO, pull["number"], TOKEN)
    assert head == github.PullHead("feature/login", f"https://github.com/{REPO}.git", REPO)
    assert github.pull_request_head(REPO, fork["number"], TOKEN).repo == "stranger/widgets"
    with pytest.raises(PermanentError, match="HTTP 404"):
        github.pull_request_head(REPO, 999, TOKEN)
    gh.default_branches[REPO] = "trunk"
    assert github.default_branch(REPO, TOKEN) == "trunk"
    with pytest.raises(PermanentError, match="not a GitHub repository name"):
        github.default_branch("../../etc", TOKEN)
