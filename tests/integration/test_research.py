"""Web search and page fetching for research jobs, against real local HTTP servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

from tasks.services import research
from tasks.settings import get_settings
from tests.support.landing_pages import PageHandler, serving

PAGE = ("<html><head><title>Tides  and ports</title><script>var x = 'secret';</script>"
        "<style>p {}</style></head><body><h1>Harbours</h1><p>Plan around the "
        "&amp; tides.</p></body></html>")


class _Site(PageHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        _Site.seen.append((self.path, self.headers.get("Authorization")))
        if parts.path == "/search":
            q = parse_qs(parts.query)["q"][0]
            body = json.dumps({"results": [
                {"title": f"About {q}", "url": "https://example.org/a", "snippet": "A"},
                {"title": "Second", "url": "https://example.org/b", "snippet": "B"}]})
            self.send_page(200, "application/json", body)
        elif parts.path == "/page":
            self.send_page(200, "text/html; charset=utf-8", PAGE)
        elif parts.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.end_headers()
        else:
            self.send_page(404, "text/plain", "no")


@pytest.fixture
def site() -> Iterator[str]:
    _Site.seen = []
    with serving(_Site) as base:
        yield base


def settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    get_settings.cache_clear()


def test_search_is_off_until_the_operator_configures_it(monkeypatch) -> None:
    settings(monkeypatch, SWITCHYARD_WEBSEARCH_URL="")
    found, note = research.websearch("tides")
    assert found == [] and "SWITCHYARD_WEBSEARCH_URL" in note
    get_settings.cache_clear()


def test_search_asks_the_configured_endpoint_with_its_key(site, monkeypatch) -> None:
    settings(monkeypatch, SWITCHYARD_WEBSEARCH_URL=f"{site}/search",
             SWITCHYARD_WEBSEARCH_KEY="search-key-1")
    found, note = research.websearch("tide tables", count=1)
    get_settings.cache_clear()
    assert note == "" and [f.title for f in found] == ["About tide tables"]
    assert _Site.seen[0][1] == "Bearer search-key-1" and "count=1" in _Site.seen[0][0]


def test_a_page_is_read_as_title_and_visible_text(site) -> None:
    page = research.fetch(f"{site}/page")
    assert page.ok and page.title == "Tides and ports"
    assert page.text == "Harbours Plan around the & tides."
    assert "secret" not in page.text


def test_pages_go_through_the_egress_guard_and_follow_no_redirect(site, monkeypatch) -> None:
    assert not research.fetch(f"{site}/moved").ok  # 302: not followed
    settings(monkeypatch, SWITCHYARD_EGRESS_ALLOW="")  # the operator allows nothing internal
    refused = research.fetch(f"{site}/page")
    get_settings.cache_clear()
    assert not refused.ok and "egress refused" in refused.error
    assert [p for p, _ in _Site.seen] == ["/moved"]  # the refused page was never asked
    assert not research.fetch("file:///etc/passwd").ok
