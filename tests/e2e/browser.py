"""What the browser test modules share, in one import: test_ui's `Site` and page helpers,
Playwright's `Page` and `expect` (absent when it is not installed: the `page` fixture then
skips the test, or fails it on CI), and a node of a drawn DAG. The `page` and `site` fixtures
reach every module through conftest.py."""

from __future__ import annotations

from typing import Any

from tests.e2e.test_ui import (
    Site,
    assert_same_document,
    mark_document,
    open_section,
    shoot,
    sign_in,
)

try:
    from playwright.sync_api import Page, expect
except ImportError:  # the `page` fixture reports it
    Page = Any  # type: ignore[misc,assignment]
    expect = None  # type: ignore[assignment]

__all__ = [
    "Page",
    "Site",
    "assert_same_document",
    "expect",
    "mark_document",
    "node",
    "open_section",
    "shoot",
    "sign_in",
]


def node(page: Page, name: str) -> Any:
    """The node named `name` of the page's DAG (dag.js draws it in #dag)."""
    return page.locator(f"#dag .dag-node[data-name='{name}']")
