"""Checks of a landing page in a real browser (Playwright driving Debian's Chromium).

Chromium never reaches the network itself: it is pointed at a proxy that does not
exist, and every request it makes — the page, each sub-resource, each navigation —
is answered by our own fetch through the egress guard (tasks.services.egress: the host
resolved once, every address checked, the call made to the checked address); a
redirect is followed by the guard, each hop checked again (Chromium does not send a
fulfilled redirect's next request back through the route). So a tenant's page cannot
make the worker reach an internal address, whatever its HTML asks for. Time and size
are capped per check.

Checks: `screenshot` (full page at 1280 px), `mobile_responsive` (390 px: a screenshot,
horizontal overflow in px, tap targets under 44 px), `waitlist_form` (a form with an
email input and a submit control; never submitted), `meta_tags` (title, description,
viewport, canonical, og:*, twitter:card; the values found and those missing).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from playwright.sync_api import Browser, Route, ViewportSize, sync_playwright
from playwright.sync_api import Error as PlaywrightError

from tasks.engine.errors import PermanentError
from tasks.services.effects.adapters import http
from tasks.services.effects.adapters.base import ProviderResult
from tasks.startup import browser_sandbox

CHECKS = ("screenshot", "mobile_responsive", "waitlist_form", "meta_tags")
DESKTOP = ViewportSize(width=1280, height=800)
MOBILE = ViewportSize(width=390, height=844)
NAVIGATION_MS = 20_000
PAGE_BYTES = 8 * 1024 * 1024  # all the answers of one page load together
MAX_REQUESTS = 200
TAP_TARGET_PX = 44
META = ("title", "description", "viewport", "canonical", "og:title", "og:description",
        "og:image", "twitter:card")
MAX_REDIRECTS = 5
# Headers a fetched answer may hand on to Chromium (no cookies, no security downgrades).
PASSED_ON = frozenset({"content-type", "cache-control", "last-modified", "etag"})

META_JS = """() => {
  const pick = (sel, attr) => { const el = document.querySelector(sel);
                                return el ? (el.getAttribute(attr) || "").trim() : null; };
  return {
    "title": document.title.trim() || null,
    "description": pick('meta[name="description"]', "content"),
    "viewport": pick('meta[name="viewport"]', "content"),
    "canonical": pick('link[rel="canonical"]', "href"),
    "og:title": pick('meta[property="og:title"]', "content"),
    "og:description": pick('meta[property="og:description"]', "content"),
    "og:image": pick('meta[property="og:image"]', "content"),
    "twitter:card": pick('meta[name="twitter:card"]', "content"),
  };
}"""
FORM_JS = """() => {
  for (const form of document.querySelectorAll("form")) {
    const email = form.querySelector('input[type="email"], input[name*="email" i]');
    const submit = form.querySelector('button:not([type="button"]):not([type="reset"]), '
                                      + 'input[type="submit"], input[type="image"]');
    if (email && submit) return {found: true, method: (form.method || "get").toLowerCase(),
                                 action: form.action || null,
                                 email_field: email.name || email.id || null};
  }
  return {found: false};
}"""
MOBILE_JS = f"""() => {{
  const overflow = Math.max(0, document.documentElement.scrollWidth - window.innerWidth);
  const small = [...document.querySelectorAll("a[href], button, input, select, textarea")]
    .filter(el => {{ const r = el.getBoundingClientRect();
                    return r.width > 0 && r.height > 0
                      && (r.width < {TAP_TARGET_PX} || r.height < {TAP_TARGET_PX}); }});
  return {{overflow_px: overflow, small_tap_targets: small.length}};
}}"""


@dataclass
class Guard:
    """Answers Chromium's requests through the egress guard and counts what it refused."""

    deadline: float
    fetched_bytes: int = 0
    requests: int = 0
    refused: list[str] = field(default_factory=list)
    main_status: int | None = None
    final_url: str | None = None

    def handle(self, route: Route) -> None:
        req = route.request
        self.requests += 1
        if self.requests > MAX_REQUESTS or time.monotonic() > self.deadline \
                or self.fetched_bytes > PAGE_BYTES:
            route.abort("blockedbyclient")
            return
        if not req.url.startswith(("http://", "https://")):
            route.abort("blockedbyclient")
            return
        headers = {k: v for k, v in req.headers.items()
                   if k.lower() in ("accept", "accept-language", "user-agent")}
        url = req.url
        resp = None
        for _ in range(MAX_REDIRECTS + 1):  # every hop through the guard
            answer = http.request("GET", url, headers=headers)
            if isinstance(answer, ProviderResult):
                self.refused.append(f"{url[:200]}: {answer.error}")
                route.abort("blockedbyclient")
                return
            resp = answer
            self.fetched_bytes += len(resp.content)
            location = resp.headers.get("location")
            if not (300 <= resp.status_code < 400 and location):
                break
            url = urljoin(url, location)
        assert resp is not None
        if req.is_navigation_request() and req.frame == req.frame.page.main_frame:
            self.main_status, self.final_url = resp.status_code, url
        route.fulfill(status=resp.status_code, body=resp.content,
                      headers={k: v for k, v in resp.headers.items()
                               if k.lower() in PASSED_ON})


@contextmanager
def browser() -> Iterator[Browser]:
    with browser_sandbox.launch() as how, sync_playwright() as p:
        b = p.chromium.launch(executable_path=how.executable, env=how.env,
                              chromium_sandbox=True, args=[
            # Anything not answered by the guard goes to a proxy that is not there.
            "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
            "--disable-background-networking", "--no-first-run", *how.args])
        try:
            yield b
        finally:
            b.close()


def check_page(url: str, checks: Collection[str], *, timeout_s: float = 60.0) -> dict[str, Any]:
    """The checks' results (and screenshots as PNG bytes under "_screenshots")."""
    guard = Guard(deadline=time.monotonic() + timeout_s)
    results: dict[str, Any] = {}
    shots: dict[str, bytes] = {}
    with browser() as b:
        context = b.new_context(viewport=DESKTOP, service_workers="block",
                                java_script_enabled=True)
        context.route("**/*", guard.handle)
        page = context.new_page()
        page.set_default_timeout(NAVIGATION_MS)
        try:
            response = page.goto(url, wait_until="load")
        except PlaywrightError as exc:
            why = "; ".join(guard.refused) or str(exc).splitlines()[0]
            raise PermanentError(f"the page could not be loaded: {why}") from None
        final_url = guard.final_url or page.url
        status = guard.main_status or (response.status if response else None)
        if "meta_tags" in checks:
            found = page.evaluate(META_JS)
            missing = [name for name in META if not found.get(name)]
            results["meta_tags"] = {"ok": not missing, "found": found, "missing": missing}
        if "waitlist_form" in checks:
            form = page.evaluate(FORM_JS)
            results["waitlist_form"] = {"ok": bool(form.get("found")), **form}
        if "screenshot" in checks:
            shots["screenshot"] = page.screenshot(full_page=True, type="png")
            results["screenshot"] = {"ok": True, "width": DESKTOP["width"]}
        if "mobile_responsive" in checks:
            page.set_viewport_size(MOBILE)
            page.wait_for_timeout(200)  # layout settles
            mobile = page.evaluate(MOBILE_JS)
            shots["mobile_responsive"] = page.screenshot(full_page=True, type="png")
            results["mobile_responsive"] = {
                "ok": mobile["overflow_px"] == 0 and mobile["small_tap_targets"] == 0,
                "width": MOBILE["width"], **mobile}
        context.close()
    return {"url": url, "final_url": final_url, "status": status, "checks": results,
            "refused_requests": guard.refused[:20], "_screenshots": shots}


def summary(result: dict[str, Any]) -> str:
    """One line for the project's memory."""
    failing = [name for name, r in result["checks"].items() if not r.get("ok")]
    if not failing:
        return f"landing page {result['final_url']} passes all checks"
    details = []
    for name in failing:
        r = result["checks"][name]
        if name == "meta_tags":
            details.append(f"missing meta tags: {', '.join(r['missing'])}")
        elif name == "waitlist_form":
            details.append("no waitlist form (an email input with a submit button)")
        elif name == "mobile_responsive":
            details.append(f"on mobile: {r['overflow_px']} px overflow, "
                           f"{r['small_tap_targets']} tap targets under {TAP_TARGET_PX} px")
        else:
            details.append(f"{name} failed")
    return f"landing page {result['final_url']}: " + "; ".join(details)
