"""browser.check_page's checks in Debian's Chromium against a real local site, and the
egress guard on every request the page makes."""

from __future__ import annotations

import io
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.engine.system_parts import CHROMIUM
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
    if not CHROMIUM.exists():
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


def _chromium_processes() -> list[dict[str, str]]:
    """Every running Chromium process: its uid, seccomp mode, type and environment."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not os.readlink(proc / "exe").endswith("/chromium"):
                continue
            status = dict(line.split(":\t", 1) for line in
                          (proc / "status").read_text().splitlines() if ":\t" in line)
            found.append({"uid": status["Uid"].split()[0], "seccomp": status["Seccomp"].strip(),
                          "cmdline": (proc / "cmdline").read_text(),
                          "environ": (proc / "environ").read_bytes().decode(errors="replace")})
        except (OSError, KeyError):
            continue  # gone meanwhile, or not ours to read
    return found


class _Spy(PageHandler):
    seen: list[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        _Spy.seen.append(_chromium_processes())  # Chromium is rendering this very page
        self.send_page(200, "text/html; charset=utf-8", GOOD)


def test_chromium_runs_sandboxed_with_none_of_the_workers_environment(
        site, monkeypatch) -> None:
    # Given a worker whose environment holds secrets
    secret = "sk-live-worker-secret-0123456789"
    monkeypatch.setenv("SWITCHYARD_SECRET_KEY", secret)
    _Spy.seen = []
    with serving(_Spy) as base:
        # When it checks a tenant's page
        browser_check.check_page(f"{base}/", ["meta_tags"])
    # Then no Chromium process could read them, renderers ran under seccomp, and none ran
    # as root
    [procs] = _Spy.seen
    assert procs, "no Chromium process was seen while it loaded the page"
    for proc in procs:
        assert secret not in proc["environ"] and "DATABASE_URL" not in proc["environ"]
        assert proc["uid"] != "0"
    renderers = [p for p in procs if "--type=renderer" in p["cmdline"]]
    assert renderers and all(p["seccomp"] == "2" for p in renderers)


def test_a_pages_webrtc_sends_nothing_to_a_local_listener(site) -> None:
    # Given a UDP listener on loopback, and a page asking WebRTC to reach it
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    page_js = (f"<script>const pc = new RTCPeerConnection({{iceServers: [{{urls: "
               f"'stun:127.0.0.1:{port}'}}, {{urls: 'turn:127.0.0.1:{port}?transport=udp', "
               "username: 'u', credential: 'c'}]}); pc.createDataChannel('x');"
               "pc.createOffer().then(o => pc.setLocalDescription(o));</script>")
    # When Chromium renders it for a few seconds
    with browser_check.browser() as b:
        page = b.new_page()
        page.set_content(page_js)
        page.wait_for_timeout(3000)
    # Then no packet arrived
    received = []
    try:
        while True:
            received.append(listener.recvfrom(2048))
    except TimeoutError:
        pass
    finally:
        listener.close()
    assert received == []
