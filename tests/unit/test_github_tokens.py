"""Whose GitHub token goes where: the project's own, else the operator's only where it is
lent (SWITCHYARD_SHARED_CREDENTIALS names github) for the repositories it names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tasks.coding import tokens
from tasks.coding.gitsource import Source
from tasks.settings import get_settings

OPERATOR = "ghp-operator"


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.setenv("SWITCHYARD_GITHUB_TOKEN", OPERATOR)
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()


def lend(monkeypatch: pytest.MonkeyPatch, kinds: str, repos: str) -> None:
    monkeypatch.setenv("SWITCHYARD_SHARED_CREDENTIALS", kinds)
    monkeypatch.setenv("SWITCHYARD_GITHUB_SHARED_REPOS", repos)
    get_settings.cache_clear()


def test_the_operators_token_is_never_lent_by_default(operator) -> None:
    assert tokens.pick(None, "acme/widgets") is None
    assert tokens.pick("ghp-own", "acme/widgets") == "ghp-own"


def test_lent_only_with_github_named_and_the_repository_matched(operator) -> None:
    lend(operator, "email", "acme/*")  # repositories named, github not lent
    assert tokens.pick(None, "acme/widgets") is None
    lend(operator, "email,github", "")  # lent, but for no repository
    assert tokens.pick(None, "acme/widgets") is None
    lend(operator, "email,github", "acme/*, Tools/CLI")
    assert tokens.pick(None, "acme/widgets") == OPERATOR
    assert tokens.pick(None, "tools/cli") == OPERATOR  # GitHub's names ignore case
    assert tokens.pick(None, "acme-evil/widgets") is None
    assert tokens.pick(None, "victim-org/private") is None
    assert tokens.pick(None, None) is None


def test_a_clone_gets_a_token_only_for_a_github_repository_it_may_serve(operator) -> None:
    lend(operator, "email,github", "acme/*")
    assert tokens.repo_of(Source("https://github.com/acme/widgets.git", "https")) == \
        "acme/widgets"
    assert tokens.repo_of(Source("https://github.com/acme/widgets", "https")) == "acme/widgets"
    assert tokens.repo_of(Source("https://gitlab.com/acme/widgets.git", "https")) is None
    assert tokens.repo_of(Source("/srv/repos/acme", "local")) is None
    assert tokens.token_for("p", Source("https://gitlab.com/acme/widgets.git", "https")) is None
