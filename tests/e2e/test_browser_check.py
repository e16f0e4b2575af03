"""browser.check_page's checks in Debian's Chromium against a real local site, and the
egress guard on every request the page makes."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from tasks.startup import browser_check
from tests.support.landing_pages import BAD, GOOD, PageHandler, serving


class _Site(PageHandler):
    paths: list[str] = []

    def do_GET(self) -> None:
        _Site.paths.append(self.path)
        if self.path == "/old":
            self.send_response(302)
            self.send_header("Location", "/good")
            self.end_headers()
            return
        body = {"/good": GOOD, "/bad": BAD}.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_page(200, "text/html; charset=utf-8", body)


@pytest.fixture
def site() -> Iterator[str]:
    if not browser_check.CHROMIUM.exists():
        pytest.skip("apt-get install chromium")
    _Site.paths = []
    with serving(_Site) as base:
        yield base


def test_a_good_landing_page_passes_and_its_internal_requests_are_refused(site) -> None:
    result = browser_check.check_page(f"{site}/old", list(browser_check.CHECKS))
    checks = result["checks"]
    assert result["final_url"] == f"{site}/good" and result["status"] == 200
    assert checks["meta_tags"]["ok"] and checks["meta_tags"]["missing"] == []
    assert checks["meta_tags"]["found"]["og:title"] == "Tidewater"
    assert checks["waitlist_form"] == {"ok": True, "found": True, "method": "post",
                                       "action": f"{site}/join", "email_field": "email"}
    assert checks["mobile_responsive"]["ok"], checks["mobile_responsive"]
    shots = result["_screenshots"]
    assert shots["screenshot"].startswith(b"\x89PNG") and shots["mobile_responsive"]
    from PIL import Image  # Pillow comes with python-pptx

    assert Image.open(io.BytesIO(shots["screenshot"])).width == 1280
    assert Image.open(io.BytesIO(shots["mobile_responsive"])).width == 390
    # The metadata service and a private address were asked for by the page, and refused
    refused = " ".join(result["refused_requests"])
    assert "169.254.169.254" in refused and "10.0.0.7" in refused
    assert "/join" not in _Site.paths  # the form was never submitted
    assert browser_check.summary(result).endswith("passes all checks")


def test_a_page_that_fails_says_what_is_missing(site) -> None:
    result = browser_check.check_page(f"{site}/bad", list(browser_check.CHECKS))
    checks = result["checks"]
    assert not checks["waitlist_form"]["ok"]
    assert "og:image" in checks["meta_tags"]["missing"]
    mobile = checks["mobile_responsive"]
    assert mobile["overflow_px"] >= 900 - 390 and mobile["small_tap_targets"] >= 1
    line = browser_check.summary(result)
    assert "missing meta tags" in line and "no waitlist form" in line and "overflow" in line
