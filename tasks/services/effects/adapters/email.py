"""Email: the Resend HTTP API when SWITCHYARD_RESEND_API_KEY is set, plain SMTP otherwise.

args: {"to": str | list[str], "subject": str, "body": str, "html": str (optional),
"from": str (optional; SWITCHYARD_EMAIL_FROM by default)}. Resend is given our
Idempotency-Key; an SMTP server has no such thing, so the Message-ID is derived
from the key instead, letting a receiving system spot a duplicate. SMTP cannot
be asked what it received, so a crashed send is always `unknown`.
"""

from __future__ import annotations

import hashlib
import smtplib
import ssl
from dataclasses import replace
from email.message import EmailMessage
from email.utils import parseaddr
from typing import Any

from tasks.services.effects.adapters import http
from tasks.services.effects.adapters.base import (
    Adapter,
    Credentials,
    ProviderResult,
    cannot_tell,
    not_sent,
)
from tasks.settings import Settings, get_settings


def message_id(key: str, sender: str) -> str:
    domain = parseaddr(sender)[1].rpartition("@")[2] or "switchyard.local"
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:40]}@{domain}>"


def foreign_sender(sender: str, s: Settings) -> str | None:
    """Why the operator's transport may not send as `sender`, or None: only the operator's
    own address (SWITCHYARD_EMAIL_FROM) or one of its verified domains
    (SWITCHYARD_EMAIL_FROM_DOMAINS) — a tenant must not mail the world as anyone it likes
    on the operator's reputation. A project's own Resend account sends as it pleases."""
    address = parseaddr(sender)[1].lower()
    if address and address == parseaddr(s.email_from)[1].lower():
        return None
    if address.count("@") == 1 and address.rpartition("@")[2] in s.email_from_domain_set:
        return None
    return (f"the operator's mail may be sent as {parseaddr(s.email_from)[1]!r} or from the "
            "domains SWITCHYARD_EMAIL_FROM_DOMAINS names, not as "
            f"{address or sender[:80]!r} (or set the project's own resend_api_key)")


def recipients(args: dict[str, Any]) -> list[str] | None:
    to = args.get("to")
    rcpts = [to] if isinstance(to, str) else to
    if not isinstance(rcpts, list) or not rcpts or not all(
            isinstance(r, str) and "@" in r for r in rcpts):
        return None
    return rcpts


def call(key: str, args: dict[str, Any], creds: Credentials) -> ProviderResult:
    rcpts = recipients(args)
    if rcpts is None or not isinstance(args.get("subject"), str) \
            or not isinstance(args.get("body"), str):
        return not_sent("email needs args.to (address or list), args.subject and args.body",
                        retryable=False)
    s = get_settings()
    given = args.get("from")
    sender = given if isinstance(given, str) else s.email_from
    if creds.own.get("resend_api_key"):  # the project's own Resend account
        return _send_resend(key, args, rcpts, sender, s, creds.own["resend_api_key"])
    if (refused := foreign_sender(sender, s)) is not None:
        return not_sent(refused, retryable=False)
    if not creds.shared:
        return not_sent(creds.missing("resend_api_key", "the server's email transport"),
                        retryable=False)
    if s.resend_api_key:
        return _send_resend(key, args, rcpts, sender, s, s.resend_api_key)
    if s.smtp_host:
        return _send_smtp(key, args, rcpts, sender, s)
    return not_sent("no email transport is configured: set SWITCHYARD_SMTP_HOST or "
                    "SWITCHYARD_RESEND_API_KEY", retryable=False)


def reconcile(key: str, args: dict[str, Any], provider_ref: str | None,
              creds: Credentials) -> ProviderResult:
    s = get_settings()
    api_key = creds.pick("resend_api_key", s.resend_api_key)
    if not api_key:
        return cannot_tell("an SMTP server cannot be asked whether it accepted a message: "
                           "check the recipient's mailbox or the server's log")
    if not provider_ref:
        return cannot_tell("Resend gave no email id before the crash, and it cannot be "
                           "searched by idempotency key: check the Resend dashboard")
    resp = http.request("GET", f"{s.resend_base_url.rstrip('/')}/emails/{provider_ref}",
                        headers={"Authorization": f"Bearer {api_key}"},
                        tenant_url=False)
    if isinstance(resp, ProviderResult) or resp.status_code != 200:
        return cannot_tell(f"Resend could not tell what became of email {provider_ref}")
    return ProviderResult("succeeded", provider_ref=provider_ref,
                          response={"transport": "resend", "status_code": 200,
                                    "body": http.body_of(resp), "reconciled": True})


def _send_resend(key: str, args: dict[str, Any], rcpts: list[str], sender: str,
                 s: Settings, api_key: str) -> ProviderResult:
    payload: dict[str, Any] = {"from": sender, "to": rcpts, "subject": args["subject"],
                               "text": args["body"]}
    if isinstance(args.get("html"), str):
        payload["html"] = args["html"]
    resp = http.request("POST", f"{s.resend_base_url.rstrip('/')}/emails", json=payload,
                        headers={"Authorization": f"Bearer {api_key}",
                                 "Idempotency-Key": key}, tenant_url=False)
    if isinstance(resp, ProviderResult):
        return resp
    result = http.classify(resp, "Resend")
    body = result.response.get("body") if isinstance(result.response, dict) else None
    if resp.status_code == 409 and isinstance(body, dict) \
            and body.get("name") == "concurrent_idempotent_requests":
        # Resend is still working on the first request with this key: ask again later.
        return not_sent(result.error or "Resend: concurrent request with this key")
    if isinstance(result.response, dict):
        result = replace(result, response={"transport": "resend", **result.response})
    return result


def _send_smtp(key: str, args: dict[str, Any], rcpts: list[str], sender: str,
               s: Settings) -> ProviderResult:
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = sender, ", ".join(rcpts), args["subject"]
    msg["Message-ID"] = mid = message_id(key, sender)
    msg.set_content(args["body"])
    if isinstance(args.get("html"), str):
        msg.add_alternative(args["html"], subtype="html")
    try:
        smtp = _connect(s)
    except smtplib.SMTPAuthenticationError as exc:
        return not_sent(f"the SMTP server refused our login: {exc.smtp_code}", retryable=False)
    except (smtplib.SMTPException, OSError) as exc:
        return not_sent(f"could not reach the SMTP server (nothing was sent): "
                        f"{type(exc).__name__}: {exc}")
    try:
        refused = smtp.send_message(msg, from_addr=parseaddr(sender)[1], to_addrs=rcpts)
    except smtplib.SMTPRecipientsRefused as exc:
        codes = [code for code, _ in exc.recipients.values()]
        return _refused(f"the SMTP server refused every recipient: {codes}", max(codes))
    except (smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as exc:
        return _refused(f"the SMTP server refused the message: {exc.smtp_code} "
                        f"{_text(exc.smtp_error)}", exc.smtp_code)
    except smtplib.SMTPNotSupportedError as exc:
        return not_sent(f"the SMTP server cannot take this message: {exc}", retryable=False)
    except (smtplib.SMTPException, OSError) as exc:
        return ProviderResult("unknown", error=f"the SMTP conversation broke off during the "
                              f"send, so the message may have been accepted: "
                              f"{type(exc).__name__}: {exc}")
    finally:
        _close(smtp)
    response = {"transport": "smtp", "message_id": mid,
                "refused": {a: [c, m.decode(errors="replace")] for a, (c, m) in refused.items()}}
    return ProviderResult("succeeded", response=response, provider_ref=mid)


def _connect(s: Settings) -> smtplib.SMTP:
    timeout = s.effect_timeout_seconds
    if s.smtp_ssl:
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(s.smtp_host, s.smtp_port, timeout=timeout,
                                              context=ssl.create_default_context())
    else:
        smtp = smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=timeout)
    try:
        smtp.ehlo()
        if s.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
            smtp.ehlo()
        if s.smtp_user:
            smtp.login(s.smtp_user, s.smtp_password)
    except BaseException:
        _close(smtp)
        raise
    return smtp


def _close(smtp: smtplib.SMTP) -> None:
    try:
        smtp.quit()
    except (smtplib.SMTPException, OSError):
        smtp.close()


def _refused(error: str, code: int) -> ProviderResult:
    """An SMTP reply code: 4xx means try later (nothing was taken), 5xx means never."""
    if 400 <= code < 500:
        return not_sent(error)
    return ProviderResult("failed", error=error)


ADAPTER = Adapter("email", call, reconcile, secrets=("resend_api_key",))


def _text(raw: bytes | str) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
