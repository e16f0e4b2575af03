"""What a research job may look at beyond the project's memory: a web search, and pages.

`websearch` goes to the search endpoint the operator configures
(SWITCHYARD_WEBSEARCH_URL: `GET <url>?q=<query>&count=<n>` answering
`{"results": [{"title", "url", "snippet"}]}`, with SWITCHYARD_WEBSEARCH_KEY as a Bearer
token when set); unset, it is off and says so, and the research goes on without it.
`fetch` reads a page a tenant named: through the egress guard (no internal address, no
redirect), a bounded answer, reduced to its title and text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from typing import Any

from tasks.services.effects.adapters import http
from tasks.services.effects.adapters.base import ProviderResult
from tasks.settings import get_settings

TEXT_LIMIT = 4000  # characters of a page's text kept for the model
RESULTS = 5
OFF = ("web search is off: the operator sets SWITCHYARD_WEBSEARCH_URL to a search endpoint "
       "to turn it on; the report uses the project's memory and the given sources")


@dataclass(frozen=True)
class Found:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class Page:
    url: str
    ok: bool
    title: str = ""
    text: str = ""
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def websearch(query: str, count: int = RESULTS) -> tuple[list[Found], str]:
    """The results, and a note for the report ("" when the search ran)."""
    s = get_settings()
    if not s.websearch_url:
        return [], OFF
    headers = {"Authorization": f"Bearer {s.websearch_key}"} if s.websearch_key else {}
    resp = http.request("GET", s.websearch_url, params={"q": query, "count": str(count)},
                        headers=headers, tenant_url=False)
    if isinstance(resp, ProviderResult):
        return [], f"web search failed: {resp.error}"
    body = http.body_of(resp)
    items = body.get("results") if isinstance(body, dict) else None
    if resp.status_code != 200 or not isinstance(items, list):
        return [], f"web search answered HTTP {resp.status_code}: {http.tenant_summary(body)}"
    found = [Found(str(i.get("title", ""))[:200], str(i.get("url", ""))[:2000],
                   str(i.get("snippet", ""))[:500]) for i in items if isinstance(i, dict)]
    return found[:count], ""


def fetch(url: str) -> Page:
    """A page a tenant named, read through the egress guard; never raises for the page."""
    if not url.startswith(("http://", "https://")):
        return Page(url, ok=False, error="only http(s) pages are fetched")
    resp = http.request("GET", url)
    if isinstance(resp, ProviderResult):
        return Page(url, ok=False, error=resp.error or "not fetched")
    if resp.status_code != 200:
        return Page(url, ok=False, error=f"HTTP {resp.status_code}")
    reader = _Text()
    reader.feed(resp.text)
    text = " ".join(" ".join(reader.parts).split())
    return Page(url, ok=True, title=" ".join(reader.title.split())[:200],
                text=text[:TEXT_LIMIT])


class _Text(HTMLParser):
    """A page's title and visible text (scripts and styles left out)."""

    SKIP = frozenset({"script", "style", "noscript", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if any(t in self.SKIP for t in self._stack):
            return
        if self._stack and self._stack[-1] == "title":
            self.title += data
        else:
            self.parts.append(data)
