"""One HTTP call out, and what its answer means for the ledger.

Every HTTP adapter shares this reading of the outcome: 2xx done; 401/403 our
credentials (nothing happened, fix the configuration); 408/425/429 not done yet,
come back later; other 4xx refused for good; 5xx, or a connection that broke
after the request went out, may have acted: `unknown`, never a blind resend.

A URL built from tenant data (a deploy hook's) goes through the egress guard
(tasks.services.egress): checked, then called at the address that was checked. No
redirect is followed and at most RESPONSE_LIMIT bytes of an answer are read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tasks.services import egress
from tasks.services.effects.adapters.base import ProviderResult, not_sent
from tasks.settings import get_settings

BODY_LIMIT = 4000  # characters of a non-JSON body kept in the ledger
SUMMARY_LIMIT = 200  # characters kept of a tenant-chosen server's answer
RESPONSE_LIMIT = 64 * 1024  # bytes of an answer read at most
TOTAL_FACTOR = 2  # an answer's body is read for at most this many effect timeouts
RETRY_LATER = {408, 425, 429}
DECODED = ("content-encoding", "content-length", "transfer-encoding")


def request(method: str, url: str, *, headers: dict[str, str] | None = None,
            json: Any = None, content: bytes | None = None,
            params: dict[str, str] | None = None, tenant_url: bool = True,
            ) -> httpx.Response | ProviderResult:
    """The provider's response, or the ProviderResult a transport failure amounts to.

    `tenant_url=False` only for a URL the operator configured (the GitHub API, Resend,
    the ads API): anything a tenant chose goes through the egress guard.
    """
    settings = get_settings()
    seconds = settings.effect_timeout_seconds
    timeout = httpx.Timeout(seconds, connect=min(seconds, 10.0))
    headers = dict(headers or {})
    extensions: dict[str, Any] = {}
    if tenant_url:
        try:
            dest = egress.resolve(url, egress.allowed())
        except egress.EgressRefused as exc:
            return not_sent(f"egress refused: {exc}", retryable=False)
        except OSError as exc:
            return not_sent(f"could not resolve the host (nothing was sent): {exc}")
        url, headers["Host"] = dest.pinned_url, dest.host_header
        if dest.scheme == "https":  # TLS still names (and verifies) the host, not the address
            extensions["sni_hostname"] = dest.host
    try:
        # A fresh client per call: a pooled connection gone stale could fail after
        # the request was written, which would turn a harmless retry into `unknown`.
        with httpx.Client(timeout=timeout, follow_redirects=False) as client, \
                _cut_after(client, (TOTAL_FACTOR + 1) * seconds), \
                client.stream(method, url, headers=headers, json=json, content=content,
                              params=params,
                              extensions=extensions) as resp:
            return _capped(resp, time.monotonic() + TOTAL_FACTOR * seconds)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as exc:
        return not_sent(f"cannot make this request: {type(exc).__name__}: {exc}",
                        retryable=False)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        return not_sent(f"could not connect (nothing was sent): {type(exc).__name__}: {exc}")
    except httpx.TransportError as exc:
        return ProviderResult(
            "unknown",
            error=f"the connection failed after the request went out, so the provider may "
                  f"have acted: {type(exc).__name__}: {exc}",
        )


@contextmanager
def _cut_after(client: httpx.Client, seconds: float) -> Iterator[None]:
    """Close the client's connections if the exchange still runs after `seconds`: httpx's
    timeout bounds each read, so a server sending its status line and headers a byte at a
    time would otherwise hold the worker for as long as it likes."""
    timer = threading.Timer(seconds, client.close)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _capped(resp: httpx.Response, deadline: float) -> httpx.Response:
    """The answer with at most RESPONSE_LIMIT bytes of its body, read until `deadline` at
    most (the rest is never read): httpx's timeout bounds each read, not the whole answer,
    so a server sending a byte now and then would otherwise hold the worker for days."""
    body = bytearray()
    for chunk in resp.iter_bytes():
        body += chunk
        if len(body) >= RESPONSE_LIMIT or time.monotonic() > deadline:
            break
    kept = [(k, v) for k, v in resp.headers.items() if k.lower() not in DECODED]
    return httpx.Response(resp.status_code, headers=kept, content=bytes(body[:RESPONSE_LIMIT]),
                          request=resp.request)


def body_of(resp: httpx.Response) -> Any:
    try:
        return scrub(resp.json())
    except ValueError:
        return resp.text[:BODY_LIMIT].replace("\x00", "\ufffd") or None


def scrub(value: Any) -> Any:
    """PostgreSQL's jsonb cannot hold NUL characters; a provider's body might."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {scrub(str(k)): scrub(v) for k, v in value.items()}
    return value


def classify(resp: httpx.Response, who: str, *, tenant: bool = False) -> ProviderResult:
    """`tenant`: the server is one a tenant chose, so its answer is kept (and handed back)
    only as a short sanitised summary: our worker must not read internal pages for anyone."""
    code = resp.status_code
    body = body_of(resp)
    said = tenant_summary(body) if tenant else summary(body)
    response: dict[str, Any] = ({"status_code": code, "summary": said} if tenant
                                else {"status_code": code, "body": body})
    if 200 <= code < 300:
        return ProviderResult("succeeded", response=response, provider_ref=ref_of(body))
    error = f"{who} answered HTTP {code}: {said}"
    retry_after = retry_after_of(resp)
    if code in RETRY_LATER or (code == 403 and retry_after is not None):
        return not_sent(error, retry_after=retry_after, rate_limited=code in (403, 429))
    if code in (401, 403):
        return not_sent(error, retryable=False)
    if 300 <= code < 400:
        return not_sent(f"{error} (redirects are not followed)", retryable=False)
    if code < 500:
        return ProviderResult("failed", response=response, error=error)
    return ProviderResult("unknown", response=response,
                          error=f"{error}; the provider may have acted before failing")


def ref_of(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("id"), str | int):
        return str(body["id"])
    return None


def summary(body: Any) -> str:
    if isinstance(body, dict):
        for field in ("message", "error", "detail"):
            if isinstance(body.get(field), str):
                return body[field][:500]
    return str(body)[:500]


def tenant_summary(body: Any) -> str:
    """At most SUMMARY_LIMIT printable characters of what a tenant-chosen server said."""
    text = " ".join("".join(c if c.isprintable() else " " for c in summary(body)).split())
    return text if len(text) <= SUMMARY_LIMIT else text[:SUMMARY_LIMIT - 1] + "…"


def retry_after_of(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(raw)) if raw else None
    except ValueError:
        return None  # an HTTP date: let the backoff decide
