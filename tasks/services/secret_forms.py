"""The forms a secret takes in text that leaves a run: itself, URL-encoded, hex, base64.

A provider's error or a function's log may carry a credential encoded (an Authorization
header's base64 `user:secret`, a hex dump, a query string), so a scrubber that looks for
the plain value alone lets it through. Base64 depends on where the secret starts within
the encoded bytes: all three alignments are covered, each cut to the characters the
secret alone determines. Forms shorter than MIN_FORM are left out (they would match
ordinary text). Pure; no I/O.
"""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus

MIN_FORM = 8


def forms(secret: str) -> set[str]:
    data = secret.encode()
    found = {secret, quote(secret, safe=""), quote_plus(secret), data.hex(), data.hex().upper()}
    for k in range(3):  # the secret starting at each offset modulo 3 of the encoded bytes
        encoded = base64.b64encode(b"\0" * k + data).decode()
        core = encoded[(8 * k + 5) // 6:(8 * (k + len(data))) // 6]
        found |= {core, core.replace("+", "-").replace("/", "_")}
    return {f for f in found if f == secret or len(f) >= MIN_FORM}
