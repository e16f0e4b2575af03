"""Ad campaigns: POST <SWITCHYARD_ADS_API_URL>/campaigns with our Idempotency-Key.

args: the campaign as the ads API takes it (a JSON object), sent as the body.
The API is asked what became of a key with `GET /campaigns?idempotency_key=<key>`,
which answers 200 {"data": [campaign, ...]} (an empty list: never received).
"""

from __future__ import annotations

from typing import Any

from tasks.services.effects.adapters import http
from tasks.services.effects.adapters.base import (
    Adapter,
    Credentials,
    ProviderResult,
    cannot_tell,
    not_sent,
)
from tasks.settings import get_settings


def _headers(creds: Credentials, key: str | None = None) -> dict[str, str]:
    api_key = creds.pick("ads_api_key", get_settings().ads_api_key)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


def call(key: str, args: dict[str, Any], creds: Credentials) -> ProviderResult:
    base = get_settings().ads_api_url
    if not base:
        return not_sent("SWITCHYARD_ADS_API_URL is not set", retryable=False)
    if not creds.shared and "ads_api_key" not in creds.own:
        return not_sent(creds.missing("ads_api_key", "SWITCHYARD_ADS_API_KEY"), retryable=False)
    resp = http.request("POST", f"{base.rstrip('/')}/campaigns", json=args,
                        headers=_headers(creds, key), tenant_url=False)
    return resp if isinstance(resp, ProviderResult) else http.classify(resp, "the ads API")


def reconcile(key: str, args: dict[str, Any], provider_ref: str | None,
              creds: Credentials) -> ProviderResult:
    base = get_settings().ads_api_url
    if not base:
        return cannot_tell("SWITCHYARD_ADS_API_URL is not set, so the ads API cannot be asked")
    resp = http.request("GET", f"{base.rstrip('/')}/campaigns",
                        params={"idempotency_key": key}, headers=_headers(creds), tenant_url=False)
    if isinstance(resp, ProviderResult):
        return cannot_tell(f"the ads API could not be asked: {resp.error}")
    body = http.body_of(resp)
    found = body.get("data") if isinstance(body, dict) else None
    if resp.status_code != 200 or not isinstance(found, list):
        return cannot_tell(f"the ads API's lookup answered HTTP {resp.status_code}: "
                           f"{http.summary(body)}")
    if not found:
        return ProviderResult("absent")
    campaign = found[0]
    return ProviderResult("succeeded", provider_ref=http.ref_of(campaign),
                          response={"status_code": 200, "body": campaign, "reconciled": True})


ADAPTER = Adapter("ad_campaign", call, reconcile, secrets=("ads_api_key",))
