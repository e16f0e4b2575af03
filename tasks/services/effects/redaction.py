"""Keep credentials out of what the ledger stores: a provider may echo them back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tasks.services import secret_forms
from tasks.settings import get_settings

REDACTED = "[redacted]"


def secrets_in_use(project_secrets: Iterable[str] = ()) -> list[str]:
    """The operator's credentials, and the project's own the call was given."""
    s = get_settings()
    candidates = (s.resend_api_key, s.github_token, s.ads_api_key, s.smtp_password,
                  *project_secrets)
    # Longest first, so a secret containing another is replaced whole; each in its encoded
    # forms too (base64, hex, URL-encoded): a provider may echo a header back.
    found = {f for c in candidates if len(c) >= 4 for f in secret_forms.forms(c)}
    return sorted(found, key=len, reverse=True)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    secrets = secrets_in_use() if secrets is None else secrets
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list):
        return [redact(v, secrets) for v in value]
    if isinstance(value, dict):
        return {redact(str(k), secrets): redact(v, secrets) for k, v in value.items()}
    return value
