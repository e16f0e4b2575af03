"""The effect ledger against real PostgreSQL and real local providers that count what arrives.

"Sent once" is always checked at the provider (requests received, messages in
the SMTP server), never only in our own tables.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tasks.engine import pg
from tasks.engine.errors import PermanentError, RetryableError
from tasks.services import keystore
from tasks.services.effects import ledger, outbox
from tasks.services.effects.adapters import ADAPTERS
from tasks.services.effects.adapters.base import Adapter, Credentials, ProviderResult
from tasks.services.effects.adapters.deploy_hook import signature
from tasks.services.effects.adapters.email import message_id
from tasks.services.effects.policy import CapReached, NotPermitted, Policy, policy_for
from tasks.settings import get_settings
from tests.integration.jobdb import in_threads, tuple_row, tuples
from tests.support.fake_providers import (  # noqa: F401 - the fixtures are used by name
    FakeProviders,
    FakeSmtp,
    fake_providers,
    fake_smtp,
)

ADS_KEY = "ads-secret-key-0123456789"


class SimulatedCrash(BaseException):
    """The worker dying between the provider's answer and the outcome's write."""


@dataclass(frozen=True)
class Fakes:
    http: FakeProviders
    smtp: FakeSmtp


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Fakes]:
    """Point every adapter at the fakes (SMTP for email unless a test sets a Resend key)."""
    http: FakeProviders = request.getfixturevalue("fake_providers")
    smtp: FakeSmtp = request.getfixturevalue("fake_smtp")
    set_env(monkeypatch,
            SWITCHYARD_SMTP_HOST=smtp.host, SWITCHYARD_SMTP_PORT=str(smtp.port),
            SWITCHYARD_GITHUB_API_URL=http.url, SWITCHYARD_GITHUB_TOKEN=http.github_token,
            SWITCHYARD_ADS_API_URL=http.url, SWITCHYARD_ADS_API_KEY=ADS_KEY,
            SWITCHYARD_RESEND_BASE_URL=http.url, SWITCHYARD_RESEND_API_KEY="",
            SWITCHYARD_EMAIL_FROM="Switchyard <ops@example.test>",
            # These tests are about the operator's providers: its credentials stand in.
            SWITCHYARD_SHARED_CREDENTIALS="email,github_dispatch,ad_campaign")
    yield Fakes(http, smtp)
    monkeypatch.undo()
    get_settings.cache_clear()


def set_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()


def set_project_settings(project: str, settings: dict[str, Any]) -> None:
    pg.execute("UPDATE projects SET settings = %s::jsonb WHERE id = %s",
               (json.dumps(settings), project))


def ledger_rows(project: str) -> list[dict[str, Any]]:
    rows = tuples("SELECT idempotency_key, action_type, status, provider_ref, response, error "
                  "FROM action_executions WHERE project_id = %s ORDER BY created_at", (project,))
    names = ("key", "action_type", "status", "provider_ref", "response", "error")
    return [dict(zip(names, r, strict=True)) for r in rows]


def deploy(fake: FakeProviders, project: str, key: str = "approval:1", *,
           status_url: bool = True, **payload: Any) -> ledger.EffectOutcome:
    url = f"{fake.url}/deploy/site"
    args: dict[str, Any] = {"url": url, "payload": {"ref": "main", **payload}}
    if status_url:
        args["status_url"] = url
    return ledger.perform(project_id=project, action_type="deploy_hook", args=args,
                          idempotency_key=key)


def send_email(project: str, key: str = "mail:1", to: str = "founder@example.test"
               ) -> ledger.EffectOutcome:
    return ledger.perform(project_id=project, action_type="email", idempotency_key=key,
                          args={"to": to, "subject": "Hello", "body": "First line"})


def crash_after_call(monkeypatch: pytest.MonkeyPatch, action_type: str) -> Callable[[], None]:
    """Make the adapter really call the provider, then die before the outcome is written.
    Returns what puts the real adapter back (the next worker's run)."""
    real = ADAPTERS[action_type]

    def call_then_crash(key: str, args: dict[str, Any], creds: Credentials) -> ProviderResult:
        real.call(key, args, creds)
        raise SimulatedCrash()

    monkeypatch.setitem(ADAPTERS, action_type, Adapter(action_type, call_then_crash,
                                                       real.reconcile, real.secrets))
    return lambda: monkeypatch.setitem(ADAPTERS, action_type, real)


# --- once per key -------------------------------------------------------------------------


def test_perform_twice_with_one_key_calls_the_provider_once(project, fakes):
    first = deploy(fakes.http, project)
    second = deploy(fakes.http, project)

    assert len(fakes.http.posts("/deploy/site")) == 1
    assert fakes.http.posts()[0].idempotency_key == "approval:1"
    assert (first.status, first.replayed, first.provider_ref) == ("succeeded", False, "dep_1")
    assert (second.status, second.replayed, second.provider_ref) == ("succeeded", True, "dep_1")
    assert second.response == first.response
    assert [r["status"] for r in ledger_rows(project)] == ["succeeded"]


def test_eight_threads_with_one_key_make_exactly_one_provider_call(project, fakes):
    # Given a slow provider, so the eight callers overlap while the first is in flight
    fakes.http.delay = 0.3

    # When eight threads perform the same effect at once
    outcomes = in_threads(8, lambda i: deploy(fakes.http, project, key="approval:herd"))

    # Then the provider got one POST; one caller made it, seven replayed its outcome
    assert len(fakes.http.posts("/deploy/site")) == 1
    assert {o.status for o in outcomes} == {"succeeded"}
    assert sorted(o.replayed for o in outcomes) == [False] + [True] * 7
    assert len(ledger_rows(project)) == 1


def test_a_key_reused_for_different_arguments_is_refused(project, fakes):
    deploy(fakes.http, project, ref="v1")
    with pytest.raises(PermanentError, match="already names a different effect"):
        deploy(fakes.http, project, ref="v2")
    assert len(fakes.http.posts()) == 1


# --- permissions and caps -----------------------------------------------------------------


@pytest.mark.parametrize(("settings", "action_type", "args"), [
    ({}, "ad_campaign", {"name": "launch", "budget_usd": 50}),  # money is off by default
    ({}, "github_dispatch", {"owner": "acme", "repo": "site", "event_type": "deploy"}),
    ({"permissions": {"deploy_hook": False}}, "deploy_hook", {"url": "http://127.0.0.1:9/x"}),
    ({"permissions": {"email": False}}, "email",
     {"to": "a@example.test", "subject": "s", "body": "b"}),
])
def test_a_refused_action_records_nothing_and_calls_nobody(project, fakes,
                                                           settings, action_type, args):
    set_project_settings(project, settings)
    with pytest.raises(NotPermitted, match=f"permissions.{action_type}"):
        ledger.perform(project_id=project, action_type=action_type, args=args,
                       idempotency_key=f"refused:{action_type}")
    assert ledger_rows(project) == []
    assert fakes.http.received == [] and fakes.smtp.messages == []


def test_the_daily_cap_refuses_the_next_effect_but_not_a_replay(project, fakes):
    set_project_settings(project, {"caps": {"deploy_hook_per_day": 2}})
    deploy(fakes.http, project, key="d:1")
    deploy(fakes.http, project, key="d:2")

    with pytest.raises(CapReached, match="cap of 2 deploy_hook"):
        deploy(fakes.http, project, key="d:3")

    assert deploy(fakes.http, project, key="d:1").replayed, "a replay sends nothing: not capped"
    assert len(fakes.http.posts()) == 2
    assert [r["key"] for r in ledger_rows(project)] == ["d:1", "d:2"]


def test_the_cap_holds_under_a_race_of_distinct_keys(project, fakes):
    set_project_settings(project, {"caps": {"deploy_hook_per_day": 3}})

    def attempt(i: int) -> str:
        try:
            return deploy(fakes.http, project, key=f"race:{i}").status
        except CapReached:
            return "capped"

    results = in_threads(8, attempt)
    assert sorted(results) == ["capped"] * 5 + ["succeeded"] * 3
    assert len(fakes.http.posts()) == 3


def test_policy_defaults_and_malformed_settings():
    assert policy_for({}, "email") == Policy(allowed=True, cap_per_day=50)
    assert policy_for({}, "deploy_hook").allowed
    assert not policy_for({}, "ad_campaign").allowed
    assert policy_for({"permissions": {"ad_campaign": True}, "caps": {"ad_campaign_per_day": 1}},
                      "ad_campaign") == Policy(allowed=True, cap_per_day=1)
    with pytest.raises(PermanentError, match="must be true or false"):
        policy_for({"permissions": {"email": "yes"}}, "email")
    with pytest.raises(PermanentError, match="whole number"):
        policy_for({"caps": {"email_per_day": -1}}, "email")


# --- crash between intent and outcome -----------------------------------------------------


def test_a_crash_after_the_deploy_call_is_reconciled_without_a_second_post(
        project, fakes, monkeypatch):
    # Given the worker died after the hook received the POST but before the outcome was written
    restart = crash_after_call(monkeypatch, "deploy_hook")
    with pytest.raises(SimulatedCrash):
        deploy(fakes.http, project)
    assert [r["status"] for r in ledger_rows(project)] == ["intent"]
    restart()

    # When the job runs again
    outcome = deploy(fakes.http, project)

    # Then the hook was asked (GET by key), not called again, and its answer is recorded
    assert len(fakes.http.posts()) == 1
    assert fakes.http.gets("/deploy/site")[0].query == {"idempotency_key": "approval:1"}
    assert (outcome.status, outcome.replayed, outcome.provider_ref) == ("succeeded", True, "dep_1")
    assert outcome.response["reconciled"] is True
    assert [r["status"] for r in ledger_rows(project)] == ["succeeded"]


def test_an_intent_the_hook_never_received_is_sent_once(project, fakes):
    # Given a crash after the intent was committed but before the POST went out
    url = f"{fakes.http.url}/deploy/site"
    args = {"url": url, "payload": {"ref": "main"}, "status_url": url}
    pg.execute("INSERT INTO action_executions (id, idempotency_key, project_id, action_type, args) "
               "VALUES (%s, 'approval:1', %s, 'deploy_hook', %s::jsonb)",
               (uuid.uuid4(), project, json.dumps(args)))

    outcome = deploy(fakes.http, project)

    assert (outcome.status, outcome.replayed) == ("succeeded", False)
    assert len(fakes.http.posts()) == 1


def test_a_crash_with_no_way_to_ask_the_hook_is_unknown_until_a_person_resolves_it(
        project, fakes, monkeypatch):
    restart = crash_after_call(monkeypatch, "deploy_hook")
    with pytest.raises(SimulatedCrash):
        deploy(fakes.http, project, status_url=False)
    restart()

    outcome = deploy(fakes.http, project, status_url=False)
    again = deploy(fakes.http, project, status_url=False)

    assert (outcome.status, again.status, again.replayed) == ("unknown", "unknown", True)
    assert "status_url" in (outcome.error or "")
    assert len(fakes.http.posts()) == 1 and fakes.http.gets() == []
    listed = ledger.unknown_effects(project)
    assert [e.idempotency_key for e in listed] == ["approval:1"]

    resolved = ledger.resolve_unknown(listed[0].id, project_id=project, status="succeeded",
                                      note="the deploy is live", by="owner")
    assert resolved is not None and resolved.status == "succeeded"
    assert resolved.response == {"resolution": {"status": "succeeded",
                                                "note": "the deploy is live", "by": "owner"}}
    assert ledger.unknown_effects(project) == []
    assert deploy(fakes.http, project, status_url=False).status == "succeeded"


def test_a_crash_after_an_smtp_send_is_unknown_and_no_second_email_goes_out(
        project, fakes, monkeypatch):
    restart = crash_after_call(monkeypatch, "email")
    with pytest.raises(SimulatedCrash):
        send_email(project)
    assert len(fakes.smtp.messages) == 1
    restart()

    outcome = send_email(project)

    assert (outcome.status, outcome.replayed) == ("unknown", True)
    assert "SMTP server cannot be asked" in (outcome.error or "")
    assert send_email(project).status == "unknown"
    assert len(fakes.smtp.messages) == 1, "never silently resent"
    assert [e.idempotency_key for e in ledger.unknown_effects(project)] == ["mail:1"]


def test_a_timeout_after_the_request_went_out_is_unknown_not_a_retry(
        project, fakes, monkeypatch):
    set_env(monkeypatch, SWITCHYARD_EFFECT_TIMEOUT_SECONDS="0.5")
    fakes.http.script("POST", "/deploy/site", 200, {"id": "slow"}, delay=1.5)

    outcome = deploy(fakes.http, project, status_url=False)
    again = deploy(fakes.http, project, status_url=False)

    assert outcome.status == "unknown" and "may have acted" in (outcome.error or "")
    assert again.replayed and len(fakes.http.posts()) == 1


def test_an_ad_campaign_crash_is_reconciled_by_looking_the_key_up(
        project, fakes, monkeypatch):
    set_project_settings(project, {"permissions": {"ad_campaign": True}})
    campaign = {"name": "launch", "budget_usd": 50}
    restart = crash_after_call(monkeypatch, "ad_campaign")
    with pytest.raises(SimulatedCrash):
        ledger.perform(project_id=project, action_type="ad_campaign", args=campaign,
                       idempotency_key="ads:1")
    restart()

    outcome = ledger.perform(project_id=project, action_type="ad_campaign", args=campaign,
                             idempotency_key="ads:1")

    assert (outcome.status, outcome.provider_ref, outcome.replayed) == ("succeeded", "cmp_1", True)
    assert len(fakes.http.posts("/campaigns")) == 1
    assert fakes.http.posts()[0].idempotency_key == "ads:1"
    assert fakes.http.posts()[0].authorization == f"Bearer {ADS_KEY}"


# --- provider answers ---------------------------------------------------------------------


def test_a_429_withdraws_the_intent_so_a_later_attempt_sends(project, fakes):
    fakes.http.script("POST", "/deploy/site", 429, {"message": "slow down"},
                     headers={"Retry-After": "7"})

    with pytest.raises(RetryableError) as caught:
        deploy(fakes.http, project)
    assert (caught.value.delay, caught.value.count_attempt) == (7.0, False)
    assert ledger_rows(project) == [], "nothing happened, so nothing stays recorded"

    assert deploy(fakes.http, project).status == "succeeded"
    assert len(fakes.http.posts()) == 2


def test_a_4xx_is_a_recorded_failure_that_is_never_retried(project, fakes):
    fakes.http.script("POST", "/deploy/site", 422, {"message": "unknown branch"})

    first = deploy(fakes.http, project)
    second = deploy(fakes.http, project)

    assert (first.status, first.error) == ("failed",
                                           "the deploy hook answered HTTP 422: unknown branch")
    assert (second.status, second.replayed) == ("failed", True)
    assert len(fakes.http.posts()) == 1


def test_an_unreachable_provider_is_not_sent_and_retryable(project, fakes, monkeypatch):
    set_env(monkeypatch, SWITCHYARD_SMTP_PORT="9")  # nothing listens on the discard port
    with pytest.raises(RetryableError, match="nothing was sent"):
        send_email(project)
    assert ledger_rows(project) == []


# --- the egress guard: a tenant's URL never reaches the operator's network -------------------

def test_a_deploy_hook_aimed_at_loopback_is_refused_and_nothing_arrives(project, fakes,
                                                                        monkeypatch):
    set_env(monkeypatch, SWITCHYARD_EGRESS_ALLOW="")  # the shipped default: nothing internal
    with pytest.raises(PermanentError, match=re.escape(
            "egress refused: 127.0.0.1 is not reachable from here: 127.0.0.1 is a loopback")):
        deploy(fakes.http, project)
    assert fakes.http.received == [], "the local server must not have been called"
    assert ledger_rows(project) == []


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/iam/",
                                 "http://[::ffff:169.254.169.254]/", "http://10.0.0.1:8080/x"])
def test_the_metadata_service_and_private_networks_are_refused(project, fakes, url):
    with pytest.raises(PermanentError, match="egress refused"):
        ledger.perform(project_id=project, action_type="deploy_hook", args={"url": url},
                       idempotency_key="approval:meta")
    assert ledger_rows(project) == []


def test_the_call_goes_to_the_address_that_was_checked(project, fakes, monkeypatch):
    """A name no DNS server knows, resolved once by the guard: the connection goes to the
    pinned address and the hook sees its own name in Host."""
    port = fakes.http.url.rsplit(":", 1)[1]
    looked_up: list[str] = []
    monkeypatch.setattr("tasks.services.egress.system_resolver",
                        lambda host, p: looked_up.append(host) or ["127.0.0.1"])
    url = f"http://hooks.pinned.test:{port}/deploy/site"
    outcome = ledger.perform(project_id=project, action_type="deploy_hook",
                             args={"url": url}, idempotency_key="approval:pinned")
    assert outcome.status == "succeeded"
    assert looked_up == ["hooks.pinned.test"]
    assert [r.host for r in fakes.http.posts()] == [f"hooks.pinned.test:{port}"]


def test_an_answer_is_read_up_to_its_cap(project, fakes):
    fakes.http.script("POST", "/deploy/site", 200, {"id": "dep_big", "log": "x" * 300_000})
    outcome = deploy(fakes.http, project)
    # 64 KiB of a 300 KB answer were read: not JSON any more, so kept as a bounded summary
    assert outcome.status == "succeeded"
    summary = ledger_rows(project)[0]["response"]["summary"]
    assert isinstance(summary, str) and len(summary) <= 200


def test_a_tenant_chosen_server_is_only_summarised_back(project, fakes):
    """Whatever a hook URL answers is the tenant's to read: never more than a short,
    printable summary, so the worker cannot be used to read internal pages."""
    page = "root:x:0:0:root:/root:/bin/bash\n\x1b[31m" + "internal " * 2000
    fakes.http.script("POST", "/deploy/site", 500, page)

    outcome = deploy(fakes.http, project, status_url=False)

    assert outcome.status == "unknown"
    [row] = ledger_rows(project)
    assert "body" not in row["response"]
    summary = row["response"]["summary"]
    assert summary.startswith("root:x:0:0") and len(summary) <= 200
    assert summary.isprintable() and "\x1b" not in summary
    assert len(row["error"]) < 300 and "\n" not in row["error"]


def test_github_dispatch_posts_the_event_with_the_token(project, fakes):
    set_project_settings(project, {"permissions": {"github_dispatch": True}})
    outcome = ledger.perform(
        project_id=project, action_type="github_dispatch", idempotency_key="gh:1",
        args={"owner": "acme", "repo": "site", "event_type": "deploy",
              "client_payload": {"ref": "main"}})

    assert outcome.status == "succeeded"
    [post] = fakes.http.posts("/repos/acme/site/dispatches")
    assert post.body == {"event_type": "deploy", "client_payload": {"ref": "main"}}
    assert post.authorization == f"Bearer {fakes.http.github_token}"


# --- email ----------------------------------------------------------------------------------


def test_smtp_email_carries_a_message_id_derived_from_the_key(project, fakes):
    outcome = send_email(project)

    [mail] = fakes.smtp.messages
    assert mail.rcpt_tos == ["founder@example.test"]
    assert mail.mail_from == "ops@example.test"
    assert mail.message["Message-ID"] == message_id("mail:1", "ops@example.test")
    assert mail.message["Subject"] == "Hello"
    assert outcome.provider_ref == mail.message["Message-ID"]
    assert outcome.response["transport"] == "smtp"


def test_a_refusing_smtp_server_is_a_recorded_failure(project, fakes):
    fakes.smtp.refuse_next = "550 mailbox unavailable"
    outcome = send_email(project)
    assert outcome.status == "failed" and "550" in (outcome.error or "")
    assert fakes.smtp.messages == []


def test_resend_gets_the_idempotency_key_and_smtp_gets_nothing(
        project, fakes, monkeypatch):
    set_env(monkeypatch, SWITCHYARD_RESEND_API_KEY=fakes.http.resend_key)

    first = send_email(project, key="mail:resend")
    second = send_email(project, key="mail:resend")

    [post] = fakes.http.posts("/emails")
    assert post.idempotency_key == "mail:resend"
    assert post.authorization == f"Bearer {fakes.http.resend_key}"
    assert post.body["to"] == ["founder@example.test"] and post.body["text"] == "First line"
    assert first.status == "succeeded" and first.provider_ref
    assert first.response["transport"] == "resend"
    assert second.replayed and fakes.smtp.messages == []


def test_a_resend_crash_before_we_learned_the_id_is_unknown(project, fakes, monkeypatch):
    set_env(monkeypatch, SWITCHYARD_RESEND_API_KEY=fakes.http.resend_key)
    restart = crash_after_call(monkeypatch, "email")
    with pytest.raises(SimulatedCrash):
        send_email(project)
    restart()

    outcome = send_email(project)

    assert outcome.status == "unknown" and "Resend gave no email id" in (outcome.error or "")
    assert len(fakes.http.posts("/emails")) == 1


# --- secrets ------------------------------------------------------------------------------


def test_secrets_a_provider_echoes_back_are_not_stored(project, fakes, monkeypatch):
    set_env(monkeypatch, SWITCHYARD_RESEND_API_KEY=fakes.http.resend_key)
    set_project_settings(project, {"permissions": {"github_dispatch": True}})
    fakes.http.script("POST", "/repos/acme/site/dispatches", 422,
                     {"message": "bad request from {authorization}"})
    fakes.http.script("POST", "/emails", 500, "internal error; request had {authorization}")

    gh = ledger.perform(project_id=project, action_type="github_dispatch", idempotency_key="gh:1",
                        args={"owner": "acme", "repo": "site", "event_type": "deploy"})
    mail = send_email(project)

    assert (gh.status, mail.status) == ("failed", "unknown")
    stored = json.dumps(ledger_rows(project), default=str)
    assert fakes.http.github_token not in stored and fakes.http.resend_key not in stored
    assert "[redacted]" in gh.error and "[redacted]" in json.dumps(mail.response)


def test_a_credentials_error_message_is_redacted_and_nothing_is_kept(
        project, fakes, monkeypatch):
    set_project_settings(project, {"permissions": {"ad_campaign": True}})
    fakes.http.script("POST", "/campaigns", 401, {"message": "key {authorization} is revoked"})
    with pytest.raises(PermanentError) as caught:
        ledger.perform(project_id=project, action_type="ad_campaign", args={"name": "x"},
                       idempotency_key="ads:1")
    assert ADS_KEY not in str(caught.value) and "[redacted]" in str(caught.value)
    assert ledger_rows(project) == []


# --- outbox ---------------------------------------------------------------------------------


def test_the_outbox_processed_twice_sends_one_message_per_row(project, fakes):
    ids = [outbox.enqueue_email(project, f"user{i}@example.test", f"Welcome {i}", "Hi",
                                "welcome", f"welcome:{i}") for i in range(3)]
    assert outbox.enqueue_email(project, "other@example.test", "x", "y", "welcome",
                                "welcome:0") == ids[0], "the same key is the same row"

    first = outbox.process_due_emails()
    second = outbox.process_due_emails()
    # Even if the rows' status writes were lost, the ledger keeps the send once per row
    pg.execute("UPDATE email_jobs SET status = 'pending', send_after = now() - interval '1 s'")
    third = outbox.process_due_emails()

    assert (first["claimed"], first["sent"]) == (3, 3)
    assert second["claimed"] == 0
    assert (third["claimed"], third["sent"]) == (3, 3)
    assert sorted(m.rcpt_tos[0] for m in fakes.smtp.messages) == [
        "user0@example.test", "user1@example.test", "user2@example.test"]
    rows = tuples("SELECT status, sent_at IS NOT NULL FROM email_jobs")
    assert rows == [("sent", True)] * 3


def test_two_concurrent_outbox_passes_send_each_row_once(project, fakes):
    for i in range(10):
        outbox.enqueue_email(project, f"u{i}@example.test", "s", "b", "drip", f"drip:{i}")

    results = in_threads(4, lambda i: outbox.process_due_emails())

    assert sum(r["sent"] for r in results) == 10
    assert len(fakes.smtp.messages) == 10


def test_an_outbox_row_whose_server_is_down_is_retried_later(project, fakes, monkeypatch):
    set_env(monkeypatch, SWITCHYARD_SMTP_PORT="9")
    email_id = outbox.enqueue_email(project, "a@example.test", "s", "b", "welcome", "w:1")

    counts = outbox.process_due_emails()

    assert counts["retrying"] == 1
    status, attempts, later, error = tuple_row(
        "SELECT status, attempts, send_after > now(), last_error FROM email_jobs WHERE id = %s",
        (email_id,))
    assert (status, attempts, later) == ("pending", 1, True)
    assert "nothing was sent" in error
    assert ledger_rows(project) == []


def test_an_outbox_row_that_crashed_mid_send_ends_unknown(project, fakes,
                                                          monkeypatch):
    email_id = outbox.enqueue_email(project, "a@example.test", "s", "b", "welcome", "w:1")
    restart = crash_after_call(monkeypatch, "email")
    with pytest.raises(SimulatedCrash):
        outbox.process_due_emails()
    restart()
    # The claim's lease runs out (the worker that held it is gone)
    pg.execute("UPDATE email_jobs SET send_after = now() - interval '1 s'")

    counts = outbox.process_due_emails()

    assert counts["unknown"] == 1 and len(fakes.smtp.messages) == 1
    assert tuple_row("SELECT status FROM email_jobs WHERE id = %s", (email_id,)) == ("unknown",)


def test_an_email_over_the_daily_cap_waits_for_tomorrow(project, fakes):
    set_project_settings(project, {"caps": {"email_per_day": 1}})
    outbox.enqueue_email(project, "a@example.test", "s", "b", "drip", "drip:a")
    outbox.enqueue_email(project, "b@example.test", "s", "b", "drip", "drip:b")

    counts = outbox.process_due_emails()

    assert (counts["sent"], counts["deferred"]) == (1, 1)
    assert len(fakes.smtp.messages) == 1
    assert tuple_row("SELECT attempts, send_after > now() + interval '1 minute' "
                     "FROM email_jobs WHERE status = 'pending'") == (0, True)


def test_unknown_action_types_and_empty_keys_are_refused(project):
    with pytest.raises(PermanentError, match="unknown action type"):
        ledger.perform(project_id=project, action_type="rocket", args={}, idempotency_key="k")
    with pytest.raises(PermanentError, match="non-empty idempotency key"):
        ledger.perform(project_id=project, action_type="email", args={}, idempotency_key="")
    with pytest.raises(PermanentError, match="does not exist"):
        ledger.perform(project_id=str(uuid.uuid4()), action_type="email", idempotency_key="k",
                       args={"to": "a@example.test", "subject": "s", "body": "b"})


def test_perform_refuses_to_run_inside_a_transaction(project, fakes):
    # The intent must be committed before the call; inside a transaction it would not be
    with pg.transaction(), pytest.raises(RuntimeError, match="inside a transaction"):
        deploy(fakes.http, project)
    assert fakes.http.received == []


def test_a_temporary_smtp_refusal_is_not_sent_and_retryable(project, fakes):
    fakes.smtp.refuse_next = "451 try again later"
    with pytest.raises(RetryableError, match="451"):
        send_email(project)
    assert ledger_rows(project) == []
    assert send_email(project).status == "succeeded"
    assert len(fakes.smtp.messages) == 1


def test_an_outbox_email_the_project_may_not_send_fails(project, fakes):
    set_project_settings(project, {"permissions": {"email": False}})
    email_id = outbox.enqueue_email(project, "a@example.test", "s", "b", "welcome", "w:1")

    assert outbox.process_due_emails()["failed"] == 1
    status, error = tuple_row("SELECT status, last_error FROM email_jobs WHERE id = %s",
                              (email_id,))
    assert status == "failed" and "permissions.email" in error
    assert fakes.smtp.messages == []


# --- the operator's policy over the project's -------------------------------------------


def test_an_effect_the_operator_forbids_is_refused_whatever_the_project_says(
        project, fakes, monkeypatch):
    # Given a project that enabled GitHub dispatches before the operator forbade them
    set_project_settings(project, {"permissions": {"github_dispatch": True}})
    set_env(monkeypatch, SWITCHYARD_EFFECTS_ALLOWED="email,deploy_hook")

    with pytest.raises(NotPermitted, match=r"operator.*SWITCHYARD_EFFECTS_ALLOWED"):
        ledger.perform(project_id=project, action_type="github_dispatch",
                       idempotency_key="gh:1",
                       args={"owner": "acme", "repo": "site", "event_type": "deploy"})

    assert fakes.http.posts() == [] and ledger_rows(project) == []


def test_the_operators_ceiling_caps_a_projects_higher_daily_cap(project, fakes, monkeypatch):
    set_project_settings(project, {"caps": {"email_per_day": 50}})
    set_env(monkeypatch, SWITCHYARD_EFFECT_CAP_CEILINGS="email=2")

    send_email(project, key="mail:1")
    send_email(project, key="mail:2")
    with pytest.raises(CapReached):
        send_email(project, key="mail:3")

    assert len(fakes.smtp.messages) == 2


# --- the project's own credentials --------------------------------------------------------


def test_github_dispatch_uses_the_projects_own_token(project, fakes, monkeypatch):
    set_project_settings(project, {"permissions": {"github_dispatch": True}})
    keystore.put(project, "github_token", "ghp-project-own-token-42")
    fakes.http.github_token = "ghp-project-own-token-42"  # GitHub knows the project's token

    outcome = ledger.perform(
        project_id=project, action_type="github_dispatch", idempotency_key="gh:own",
        args={"owner": "acme", "repo": "site", "event_type": "deploy"})

    assert outcome.status == "succeeded"
    [post] = fakes.http.posts("/repos/acme/site/dispatches")
    assert post.authorization == "Bearer ghp-project-own-token-42"


def test_the_operators_token_is_not_lent_unless_the_operator_shares_it(project, fakes,
                                                                        monkeypatch):
    set_project_settings(project, {"permissions": {"github_dispatch": True}})
    set_env(monkeypatch, SWITCHYARD_SHARED_CREDENTIALS="email")

    with pytest.raises(PermanentError, match="github_token"):
        ledger.perform(project_id=project, action_type="github_dispatch",
                       idempotency_key="gh:borrow",
                       args={"owner": "anyone", "repo": "anything", "event_type": "deploy"})

    assert fakes.http.posts() == [] and ledger_rows(project) == []


def test_email_without_a_shared_transport_needs_the_projects_own_key(project, fakes,
                                                                     monkeypatch):
    set_env(monkeypatch, SWITCHYARD_SHARED_CREDENTIALS="")
    with pytest.raises(PermanentError, match="resend_api_key"):
        send_email(project)
    assert fakes.smtp.messages == []

    keystore.put(project, "resend_api_key", "re_project_key_0123456789")
    fakes.http.script("POST", "/emails", 200, {"id": "em_own", "echo": "{authorization}"})
    outcome = send_email(project, key="mail:own")

    assert outcome.status == "succeeded" and fakes.smtp.messages == []
    [post] = fakes.http.posts("/emails")
    assert post.authorization == "Bearer re_project_key_0123456789"
    stored = json.dumps(ledger_rows(project))
    assert "re_project_key_0123456789" not in stored and "[redacted]" in stored


def test_a_deploy_hook_call_is_signed_with_the_projects_secret(project, fakes):
    keystore.put(project, "deploy_hook_secret", "whsec-project-77")

    deploy(fakes.http, project)

    [post] = fakes.http.posts("/deploy/site")
    assert post.signature is not None
    stamp = int(post.signature.split(",")[0].removeprefix("t="))
    assert post.signature == signature("whsec-project-77", stamp, "approval:1", post.raw)
    assert abs(stamp - time.time()) < 60
    assert json.loads(post.raw) == {"ref": "main"}


def test_a_credential_that_cannot_be_read_leaves_no_intent_behind(project, fakes, monkeypatch):
    """Read before the intent: an intent with no call made would later pass for a crash
    mid-call and be marked unknown, blocking the action and counting towards the cap."""
    def unreadable(*_: object) -> dict[str, str]:
        raise keystore.SecretUnreadable("sealed under another key")

    monkeypatch.setattr(keystore, "read", unreadable)
    with pytest.raises(keystore.SecretUnreadable):
        deploy(fakes.http, project, status_url=False)
    assert ledger_rows(project) == [] and fakes.http.posts() == []

    monkeypatch.undo()
    assert deploy(fakes.http, project, status_url=False).status == "succeeded"
    assert len(fakes.http.posts("/deploy/site")) == 1


def _trickled_deploy(project, monkeypatch, head: bytes, key: str) -> tuple[float, Any]:
    """A deploy hook to a server that answers `head`, then one byte every 0.3 s (httpx's
    timeout is per read: a 1 s timeout stays happy for hours); the seconds it took and the
    outcome."""
    import socket
    import threading

    set_env(monkeypatch, SWITCHYARD_EFFECT_TIMEOUT_SECONDS="1")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(head)
            while not stop.is_set():
                try:
                    conn.sendall(b"x")
                except OSError:
                    return
                time.sleep(0.3)

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    try:
        outcome = ledger.perform(project_id=project, action_type="deploy_hook",
                                 idempotency_key=key,
                                 args={"url": f"http://127.0.0.1:{port}/hook"})
    finally:
        stop.set()
        listener.close()
    return time.monotonic() - started, outcome


def test_a_server_trickling_its_answer_holds_the_worker_no_longer_than_its_deadline(
        project, fakes, monkeypatch):
    """The answer's status counts; its body is read for 2 s at most."""
    took, outcome = _trickled_deploy(
        project, monkeypatch, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",
        "approval:trickle")
    assert took < 5
    assert outcome.status == "succeeded"


def test_a_server_trickling_its_headers_holds_the_worker_no_longer_than_its_deadline(
        project, fakes, monkeypatch):
    """The status line and headers come before any body: a server sending them a byte at a
    time is cut at (2 + 1) effect timeouts; what it did is unknown."""
    took, outcome = _trickled_deploy(project, monkeypatch, b"HTTP/1.1 200 OK\r\nX-Slow: ",
                                     "approval:trickle-headers")
    assert took < 6
    assert outcome.status == "unknown"
