"""The operator's mail goes out only as the operator's address or its verified domains."""

from __future__ import annotations

from dataclasses import replace

from tasks.services.effects.adapters.email import foreign_sender
from tasks.settings import Settings, get_settings


def settings(domains: str = "") -> Settings:
    return replace(get_settings(), email_from="Acme <hello@acme.test>", email_from_domains=domains)


def test_only_the_operators_address_or_verified_domains_may_send() -> None:
    s = settings("mail.acme.test, @acme-news.test")
    assert foreign_sender("Acme <hello@acme.test>", s) is None
    assert foreign_sender("HELLO@ACME.TEST", s) is None
    assert foreign_sender("News <team@acme-news.test>", s) is None
    assert foreign_sender("ceo@mail.acme.test", s) is None
    for forged in ("ceo@bank.test", "Bank <security@bank.test>", "x@acme.test.evil.test",
                   "a@b@acme-news.test", "not an address"):
        refused = foreign_sender(forged, s)
        assert refused is not None and "SWITCHYARD_EMAIL_FROM_DOMAINS" in refused, forged


def test_no_domain_is_verified_by_default() -> None:
    assert foreign_sender("someone@acme.test", settings()) is not None
