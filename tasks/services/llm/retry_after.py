"""How long a provider asked us to wait: the one reading of its retry-after headers, for
every provider (Anthropic's and OpenAI's SDKs both expose the response's headers)."""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime
from typing import Any

DEFAULT_RETRY_AFTER = 10.0  # seconds, when a busy answer names no retry-after
MAX_RETRY_AFTER = 3600.0  # a garbled header must not park the provider for days


def retry_after(headers: Any) -> float:
    """Seconds to wait, from retry-after-ms, retry-after (seconds or an HTTP date), or a default."""
    ms = _number(headers.get("retry-after-ms"))
    seconds = ms / 1000 if ms is not None else _number(headers.get("retry-after"))
    if seconds is None:
        seconds = _seconds_until(headers.get("retry-after"))
    if seconds is None:
        return DEFAULT_RETRY_AFTER
    return min(max(seconds, 0.1), MAX_RETRY_AFTER)


def _number(raw: str | None) -> float | None:
    try:
        value = float(raw) if raw else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _seconds_until(raw: str | None) -> float | None:
    if not raw:
        return None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()
