"""Deploy hooks: an HTTP POST to the hook URL carrying our Idempotency-Key.

args: {"url": str, "payload": dict (optional), "status_url": str (optional)}.
Reconciling needs a hook that can answer "did you get this key?": when args
carry `status_url`, `GET <status_url>?idempotency_key=<key>` must answer
200 {"idempotency_key": key, "found": true, "status_code": int, "response": ...}
or 404 {"idempotency_key": key, "found": false}. Without it (most hosted hooks,
some of which deploy on a GET) we never probe the hook: the outcome is unknown.

The URL is the tenant's: the call goes through the egress guard, and only a short
sanitised summary of the answer is kept. When the project has a
`deploy_hook_secret`, the request is signed so the hook can tell it is ours:
`X-Switchyard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<key>.<body>">`
(<key> the Idempotency-Key header, so a replay cannot pass for a new deploy).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from tasks.services.effects.adapters import http
from tasks.services.effects.adapters.base import (
    Adapter,
    Credentials,
    ProviderResult,
    cannot_tell,
    not_sent,
)

SIGNATURE = "X-Switchyard-Signature"


def signature(secret: str, timestamp: int, key: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.{key}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def call(key: str, args: dict[str, Any], creds: Credentials) -> ProviderResult:
    url = args.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return not_sent("deploy_hook needs args.url, an http(s) URL", retryable=False)
    body = json.dumps(args.get("payload") or {}, separators=(",", ":")).encode()
    headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
    if creds.own.get("deploy_hook_secret"):
        headers[SIGNATURE] = signature(creds.own["deploy_hook_secret"], int(time.time()), key,
                                       body)
    resp = http.request("POST", url, headers=headers, content=body)
    if isinstance(resp, ProviderResult):
        return resp
    return http.classify(resp, "the deploy hook", tenant=True)


def reconcile(key: str, args: dict[str, Any], provider_ref: str | None,
              creds: Credentials) -> ProviderResult:
    status_url = args.get("status_url")
    if not isinstance(status_url, str) or not status_url:
        return cannot_tell("the deploy hook has no status_url, so it cannot be asked whether "
                           "it received the request: check the deployment by hand")
    resp = http.request("GET", status_url, params={"idempotency_key": key})
    if isinstance(resp, ProviderResult):
        return cannot_tell(f"the deploy hook's status endpoint could not be asked: {resp.error}")
    body = http.body_of(resp)
    if not isinstance(body, dict) or body.get("idempotency_key") != key:
        return cannot_tell(f"the deploy hook's status endpoint answered HTTP "
                           f"{resp.status_code} without echoing our key")
    if resp.status_code == 404 and body.get("found") is False:
        return ProviderResult("absent")
    if resp.status_code == 200 and body.get("found") is True:
        code = body.get("status_code", 200)
        response = {"status_code": code, "summary": http.tenant_summary(body.get("response")),
                    "reconciled": True}
        ref = http.ref_of(body.get("response"))
        if isinstance(code, int) and 200 <= code < 300:
            return ProviderResult("succeeded", response=response, provider_ref=ref)
        if isinstance(code, int) and 400 <= code < 500:
            return ProviderResult("failed", response=response,
                                  error=f"the deploy hook had answered HTTP {code}")
    return cannot_tell(f"the deploy hook's status endpoint answered HTTP {resp.status_code}: "
                       f"{http.tenant_summary(body)}")


ADAPTER = Adapter("deploy_hook", call, reconcile, secrets=("deploy_hook_secret",))
