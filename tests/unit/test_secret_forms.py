"""A secret is scrubbed in the forms it leaves a run in: plain, URL-encoded, hex, base64."""

from __future__ import annotations

import base64

from tasks.functions.record import SCRUBBED, Secrets
from tasks.services.effects.redaction import REDACTED, redact, secrets_in_use

SECRET = "sk-live-4f9a1c0e77b2"


def test_every_encoded_form_of_a_secret_is_scrubbed_wherever_it_starts() -> None:
    secrets = Secrets()
    secrets.add(SECRET)
    for prefix in ("", "u", "us", "user:"):  # every base64 alignment, as in Basic auth
        basic = base64.b64encode(f"{prefix}{SECRET}".encode()).decode()
        assert SCRUBBED in secrets.text(f"Authorization: Basic {basic}"), prefix
        urlsafe = base64.urlsafe_b64encode(f"{prefix}{SECRET}?".encode()).decode()
        assert SCRUBBED in secrets.text(urlsafe)
    assert secrets.text(f"dump {SECRET.encode().hex()} end") == f"dump {SCRUBBED} end"
    assert SCRUBBED in secrets.text(SECRET.encode().hex().upper())
    assert secrets.text("an ordinary sentence stays as it is") == \
        "an ordinary sentence stays as it is"


def test_the_effects_redaction_covers_the_encoded_forms_too() -> None:
    header = base64.b64encode(f"api:{SECRET}".encode()).decode()
    echoed = {"request": {"headers": {"authorization": f"Basic {header}"}},
              "hex": SECRET.encode().hex()}
    out = redact(echoed, secrets_in_use([SECRET]))
    assert REDACTED in out["request"]["headers"]["authorization"] and out["hex"] == REDACTED
