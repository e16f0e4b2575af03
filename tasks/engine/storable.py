"""The one check that a value is JSON PostgreSQL will store, shared by steps, results,
events and the effect ledger (which used to disagree about NUL and lone surrogates)."""

from __future__ import annotations

import json
import re
from typing import Any

from tasks.engine.errors import PermanentError

# A JSON \u0000 escape (not preceded by an escaped backslash): jsonb refuses it.
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def to_json(value: Any, what: str) -> str:
    """JSON text PostgreSQL will store; anything else fails the job now, not its next write."""
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise PermanentError(f"{what} is not JSON-serialisable: {exc}") from None
    if _NUL_ESCAPE.search(encoded):
        raise PermanentError(f"{what} contains a NUL character, which PostgreSQL cannot store")
    try:  # a lone surrogate (half an emoji) is valid Python, but not UTF-8 or jsonb
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise PermanentError(f"{what} contains text that is not valid Unicode (a lone "
                             "surrogate), which PostgreSQL cannot store") from None
    return encoded
