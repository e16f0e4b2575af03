"""A project's contact address gets digests and nudges only once whoever reads it confirms it.

Any owner may type any address into `contact_email`, and the drips are sent on the operator's
mail credentials: without a confirmation Switchyard would mail strangers daily on a tenant's
say-so. Setting an address mails it one link; opening the link records the address as
`contact_email_confirmed`. The drips' SQL (startup/mail.py) sends only where the two are
equal, so changing the address unconfirms it without any other bookkeeping.

The link carries an HMAC of (project, address) under a key derived for this use alone: it
proves the reader got the mail, stores nothing, and stops working when the address changes.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC
from urllib.parse import urlencode

from tasks.engine import pg
from tasks.services.effects.outbox import enqueue_email
from tasks.services.keys import derived_key
from tasks.settings import get_settings

CONFIRMED = "contact_email_confirmed"  # the settings key only this module writes
CONFIRM_PATH = "/api/contact/confirm"


def confirmation_mac(project_id: str, email: str) -> str:
    key = derived_key(get_settings(), "contact-confirm/v1")
    return hmac.new(key, f"{project_id}\n{email.strip().lower()}".encode(),
                    hashlib.sha256).hexdigest()


def confirmation_link(base_url: str, project_id: str, email: str) -> str:
    query = urlencode({"project": project_id, "token": confirmation_mac(project_id, email)})
    return f"{base_url.rstrip('/')}{CONFIRM_PATH}?{query}"


def request_confirmation(project_id: str, email: str, base_url: str) -> None:
    """Mail the link; at most one per project, address and UTC day, however often it is set."""
    day = pg.db_now().astimezone(UTC).strftime("%Y-%m-%d")
    address = hashlib.sha256(email.strip().lower().encode()).hexdigest()[:16]
    enqueue_email(project_id, email, "Confirm this address for Switchyard",
                  "Someone asked Switchyard to send this address a daily digest of their "
                  "project. Nothing will be sent unless you confirm:\n\n"
                  f"{confirmation_link(base_url, project_id, email)}\n\n"
                  "If this was not you, ignore this message.",
                  "confirm", f"confirm:{project_id}:{address}:{day}")


CONFIRM = f"""
UPDATE projects SET settings = settings || jsonb_build_object('{CONFIRMED}',
    settings->>'contact_email')
WHERE id = %(project)s AND lower(settings->>'contact_email') = %(email)s
RETURNING settings->>'contact_email' AS email
"""


def addressed(project_id: str, token: str) -> str | None:
    """The project's current address when the token names it, else None (nothing changes)."""
    row = pg.fetch_one_dict("SELECT settings->>'contact_email' AS email FROM projects "
                            "WHERE id = %s", (project_id,))
    email = (row or {}).get("email")
    if not email or not hmac.compare_digest(confirmation_mac(project_id, email), token):
        return None
    return str(email)


def confirm(project_id: str, token: str) -> str | None:
    """The confirmed address, or None when the token does not name the project's address."""
    email = addressed(project_id, token)
    if email is None:
        return None
    done = pg.fetch_one_dict(CONFIRM, {"project": project_id, "email": email.strip().lower()})
    return done["email"] if done else None
