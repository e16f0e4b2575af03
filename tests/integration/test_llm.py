"""The LLM layer against real services: the real SDK over HTTP to a local fake, PostgreSQL, Redis.

Covers both providers, usage and cost bookkeeping, daily budgets that park a job
until midnight, and the provider pause every worker shares after a 429/529.
"""

# ruff: noqa: F811 - the fake_anthropic fixture is imported, then requested by name

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks.engine import pg
from tasks.engine.errors import PermanentError, RetryableError, Suspend
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services.llm import get_client, reset_client
from tasks.services.llm.anthropic_provider import AnthropicProvider
from tasks.services.llm.errors import ProviderBusy
from tasks.services.llm.flow import (
    budget_status,
    call_llm,
    check_budget,
    pause_provider,
    paused_for,
)
from tasks.services.llm.pricing import DEFAULT_PRICE, price_for
from tasks.services.llm.scripted import ScriptedProvider
from tasks.services.llm.types import LLMRequest, LLMResult, Usage
from tasks.settings import SettingsError, get_settings
from tasks.startup.packet import PacketAction, parse_packet
from tests.conftest import wait_until
from tests.integration.jobdb import job, new_job, status_history, tuples, wait_for
from tests.support.fake_anthropic import FakeAnthropic, fake_anthropic  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
MODEL = "claude-test-1"  # unknown to the pricing table, and not a deprecated id
TOOLS = [{"name": "get_weather", "description": "The weather somewhere",
          "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]


def provider(fake: FakeAnthropic, model: str = MODEL) -> AnthropicProvider:
    return AnthropicProvider(api_key="sk-test-secret", base_url=fake.url, model=model,
                             timeout=5, max_tokens_cap=500)


def ask(text: str = "What should I build?", **fields) -> LLMRequest:
    return LLMRequest(purpose="chat", system="Be brief.",
                      messages=[{"role": "user", "content": text}], **fields)


def set_project_settings(project: str, settings: dict) -> None:
    pg.execute("UPDATE projects SET settings = %s::jsonb WHERE id = %s",
               (json.dumps(settings), project))


def add_usage(project: str, tokens: int, usd: float, created: str = "now()") -> None:
    pg.execute("INSERT INTO llm_usage (project_id, provider, model, input_tokens, output_tokens, "
               f"cost_usd, created_at) VALUES (%s, 'anthropic', 'm', %s, 0, %s, {created})",
               (project, tokens, usd))


def next_utc_midnight() -> datetime:
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(1)


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """Settings and the client re-read from the environment the test sets, and again after."""
    get_settings.cache_clear()
    reset_client()
    yield
    get_settings.cache_clear()
    reset_client()


# --- a job type whose step calls the model through call_llm ------------------

class LLMCall(BaseModel):
    base_url: str
    text: str = "hello"


def llm_call(ctx, p: LLMCall) -> dict:
    client = AnthropicProvider(api_key="sk-test-secret", base_url=p.base_url, model=MODEL,
                               timeout=5)
    req = ask(p.text)
    stored = ctx.step("llm", lambda: call_llm(client, req, project_id=ctx.project_id,
                                              job_id=ctx.job_id).as_dict())
    result = LLMResult.from_dict(stored)
    return {"text": result.text, "tokens": result.usage.total_tokens}


# max_attempts=1: if a 429 used up an attempt, the job would fail instead of completing.
register(JobType("test.llm_call", LLMCall, llm_call, max_attempts=1,
                 retry_policy=RetryPolicy(base_seconds=0.05, max_seconds=0.1)))


# --- the anthropic provider over real HTTP -----------------------------------

def test_complete_returns_text_usage_and_cost(fake_anthropic):
    result = provider(fake_anthropic, "claude-haiku-4-5").complete(ask("hi there",
                                                                     max_tokens=9000))

    assert result.text == "Hello from the fake. You said: hi there"
    assert (result.provider, result.model, result.stop_reason) == (
        "anthropic", "claude-haiku-4-5", "end_turn")
    assert result.usage == Usage(12, 7)
    assert result.cost_usd == pytest.approx((12 * 1.0 + 7 * 5.0) / 1e6)  # haiku 4.5 list price
    sent = fake_anthropic.received[0]
    assert sent.headers["Authorization"] == "Bearer sk-test-secret"
    assert sent.body["system"] == "Be brief."
    assert sent.body["max_tokens"] == 500  # capped by SWITCHYARD_LLM_MAX_TOKENS's value


def test_stream_hands_each_text_delta_to_on_text(fake_anthropic):
    pieces: list[str] = []

    result = provider(fake_anthropic).stream(ask("stream this please"), pieces.append)

    assert len(pieces) > 3
    assert "".join(pieces) == result.text == "Hello from the fake. You said: stream this please"
    assert result.usage == Usage(12, 7)
    assert result.cost_usd == DEFAULT_PRICE.cost(Usage(12, 7))
    assert fake_anthropic.received[0].body["stream"] is True


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
def test_tool_use_blocks_become_tool_calls(fake_anthropic, streaming):
    fake_anthropic.tool_input = {"location": "Paris", "units": "metric"}
    req = ask("Weather in Paris?", tools=TOOLS)
    client = provider(fake_anthropic)

    result = client.stream(req, lambda _: None) if streaming else client.complete(req)

    assert result.stop_reason == "tool_use"
    assert [(c.name, c.input) for c in result.tool_calls] == [
        ("get_weather", {"location": "Paris", "units": "metric"})]
    assert result.tool_calls[0].id.startswith("toolu_")
    assert fake_anthropic.received[0].body["tools"] == TOOLS


@pytest.mark.parametrize(("status", "retry_after", "expected", "counts", "delay"), [
    pytest.param(429, 2.5, ProviderBusy, False, 2.5, id="429 waits its retry-after, no attempt"),
    pytest.param(529, 3, ProviderBusy, False, 3.0, id="529 overloaded is the same"),
    pytest.param(529, None, ProviderBusy, False, 10.0, id="no retry-after: the default wait"),
    pytest.param(500, None, RetryableError, True, None, id="5xx: a counted retry"),
    pytest.param(400, None, PermanentError, None, None, id="400: our request is wrong"),
    pytest.param(401, None, PermanentError, None, None, id="401: the key is wrong"),
])
def test_api_errors_map_to_what_the_job_should_do(fake_anthropic, status, retry_after, expected,
                                                  counts, delay):
    fake_anthropic.fail_next(1, status, retry_after)

    with pytest.raises(expected) as caught:
        provider(fake_anthropic).complete(ask())

    assert type(caught.value) is expected
    if counts is not None:
        assert (caught.value.count_attempt, caught.value.delay) == (counts, delay)


@pytest.mark.parametrize(("error_type", "expected", "counts"), [
    pytest.param("overloaded_error", ProviderBusy, False, id="overloaded mid-stream: busy"),
    pytest.param("api_error", RetryableError, True, id="a server error mid-stream: retry"),
])
def test_an_error_event_mid_stream_is_mapped_too(fake_anthropic, error_type, expected, counts):
    fake_anthropic.break_next_stream(error_type)
    pieces: list[str] = []

    with pytest.raises(expected) as caught:
        provider(fake_anthropic).stream(ask(), pieces.append)

    assert type(caught.value) is expected and caught.value.count_attempt is counts
    assert pieces == ["Hello "]  # what arrived before the cut was passed on


def test_an_unreachable_api_is_a_counted_retry(fake_anthropic):
    url = fake_anthropic.url
    fake_anthropic.close()

    with pytest.raises(RetryableError) as caught:
        AnthropicProvider(api_key="k", base_url=url, model=MODEL, timeout=2).complete(ask())

    assert type(caught.value) is RetryableError and caught.value.count_attempt


def test_the_api_key_appears_in_no_log_error_or_settings(fake_anthropic, project, caplog,
                                                          monkeypatch, fresh_settings):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret")
    caplog.set_level(logging.DEBUG)
    fake_anthropic.fail_next(1, 429, 0.2)

    with pytest.raises(ProviderBusy) as caught:
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)
    time.sleep(0.3)  # the pause is over
    call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)

    assert "sk-test-secret" not in str(caught.value)
    assert "sk-test-secret" not in caplog.text
    assert "sk-test-secret" not in repr(get_settings())
    assert get_settings().anthropic_api_key == "sk-test-secret"


# --- settings, client choice and prices ----------------------------------------

def test_get_client_builds_the_configured_provider(monkeypatch, fresh_settings):
    assert get_client().provider == "scripted"  # the offline default
    assert get_client() is get_client()

    monkeypatch.setenv("SWITCHYARD_LLM_PROVIDER", "anthropic")
    get_settings.cache_clear()
    reset_client()
    with pytest.raises(SettingsError, match="ANTHROPIC_API_KEY"):
        get_client()

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("SWITCHYARD_LLM_MODEL", "claude-haiku-4-5")
    get_settings.cache_clear()
    client = get_client()
    assert (client.provider, client.model) == ("anthropic", "claude-haiku-4-5")

    monkeypatch.setenv("SWITCHYARD_LLM_PROVIDER", "gpt")
    get_settings.cache_clear()
    reset_client()
    with pytest.raises(SettingsError, match="scripted"):
        get_client()


def test_prices_come_from_the_table_or_the_environment(monkeypatch, fresh_settings):
    assert price_for("claude-haiku-4-5-20251001").input_per_mtok == 1.0  # a dated id
    assert price_for("claude-opus-4-1").output_per_mtok == 75.0  # the longest prefix wins
    assert price_for("someone-elses-model") == DEFAULT_PRICE

    monkeypatch.setenv("SWITCHYARD_LLM_PRICE_INPUT_PER_MTOK", "0.5")
    monkeypatch.setenv("SWITCHYARD_LLM_PRICE_OUTPUT_PER_MTOK", "2")
    get_settings.cache_clear()
    price = price_for("claude-haiku-4-5")
    assert (price.input_per_mtok, price.output_per_mtok) == (0.5, 2.0)
    assert price.cost(Usage(1_000_000, 500_000)) == 1.5


# --- the scripted provider -------------------------------------------------------

PROJECT_CONTEXT = {
    "project_name": "Tidewater", "goal": "Sell tide-aware scheduling to harbour masters",
    "phase": "validation", "contact_email": "founder@tidewater.test",
    "deploy_hook_url": "https://deploy.test/hooks/abc", "github_repo": "tidewater/app",
    "memory": [{"category": "decision", "key": "pricing", "content": "charge per harbour"},
               {"category": "fact", "key": "pilot", "content": "Port Lune runs the pilot"}],
    "latest_packet": {"title": "Tidewater: idea packet"},
}


def scripted_request(purpose: str, **context) -> LLMRequest:
    return LLMRequest(purpose=purpose, system="", messages=[
        {"role": "user", "content": context.pop("user_message", "next?")}],
        context={**PROJECT_CONTEXT, **context})


def test_scripted_packets_are_deterministic_valid_and_built_from_the_project():
    client = ScriptedProvider()
    first = client.complete(scripted_request("packet"))

    assert client.complete(scripted_request("packet")) == first
    packet = parse_packet(first.text)
    assert "Tidewater" in packet.title and "harbour masters" in packet.summary
    assert "Tidewater: idea packet" in packet.summary
    assert any("charge per harbour" in insight for insight in packet.insights)
    args = {a.type: a.args for a in packet.actions}
    assert args["email"]["to"] == "founder@tidewater.test"
    assert args["deploy_hook"]["url"] == "https://deploy.test/hooks/abc"
    assert args["github_dispatch"]["repo"] == "tidewater/app"
    assert args["ad_campaign"]["daily_budget_usd"] == 10
    assert (first.provider, first.cost_usd) == ("scripted", 0.0)
    assert first.usage.output_tokens == -(-len(first.text) // 4)

    bare = parse_packet(client.complete(LLMRequest("packet", "", [], context={})).text)
    assert bare.actions == []  # no contact, hook or repo: nothing it could do

    # What the project's settings refuse is not proposed (the context says why)
    refused = {"ad_campaign": "money is off", "github_dispatch": "pushes are off"}
    held = parse_packet(client.complete(scripted_request("packet", actions_refused=refused)).text)
    assert {a.type for a in held.actions} == {"email", "deploy_hook"}


def test_scripted_chat_streams_a_reply_about_the_message_goal_and_memory():
    pieces: list[str] = []
    req = scripted_request("chat", user_message="How should we price the pilot?")

    result = ScriptedProvider().stream(req, pieces.append)

    assert len(pieces) >= 4 and "".join(pieces) == result.text
    assert "How should we price the pilot?" in result.text
    assert "harbour masters" in result.text
    assert "Port Lune runs the pilot" in result.text  # the entry sharing most words
    assert ScriptedProvider().complete(req).text == result.text


def test_scripted_plans_are_small_dags_and_nightshift_actions_validate():
    for goal in ("a", "b", "c", "d", "e", "f"):
        plan = json.loads(ScriptedProvider().complete(scripted_request("plan", goal=goal)).text)
        ids = [t["id"] for t in plan["tasks"]]
        assert 3 <= len(ids) <= 5
        for position, task in enumerate(plan["tasks"]):
            assert set(task["depends_on"]) <= set(ids[:position])  # only earlier tasks: acyclic

    actions = json.loads(ScriptedProvider().complete(scripted_request("nightshift")).text)
    assert {PacketAction.model_validate(a).type for a in actions} == {
        "email", "deploy_hook", "github_dispatch", "ad_campaign"}


@pytest.mark.parametrize(("text", "problem"), [
    ("no json here", "not JSON"),
    ('{"title": "x", "summary": ', "not JSON"),
    ('{"title": "", "summary": "s"}', "title"),
    ('{"title": "t", "summary": "s", "actions": [{"type": "fax", "title": "t"}]}', "type"),
    ('{"title": "t", "summary": "s", "actions": [{"type": "email", "title": "t", '
     '"args": {"to": "a@b.test"}}]}', "subject"),
], ids=["no object", "truncated", "empty title", "unknown action", "email without subject"])
def test_parse_packet_rejects_what_is_not_a_packet(text, problem):
    with pytest.raises(PermanentError, match=problem):
        parse_packet(text)


def test_parse_packet_finds_the_json_in_a_fenced_answer():
    packet = parse_packet('Here you go:\n```json\n{"title": "t", "summary": "s"}\n```')
    assert (packet.title, packet.actions) == ("t", [])


# --- usage and budgets -------------------------------------------------------------

def test_call_llm_records_usage_and_cost(fake_anthropic, project):
    result = call_llm(provider(fake_anthropic, "claude-haiku-4-5"), ask(),
                      project_id=project, job_id=None)

    rows = tuples("SELECT provider, model, input_tokens, output_tokens, cost_usd::float8, "
                  "job_id FROM llm_usage WHERE project_id = %s", (project,))
    assert rows == [("anthropic", "claude-haiku-4-5", 12, 7, result.cost_usd, None)]
    assert budget_status(project).tokens_used == 19


@pytest.mark.parametrize(("settings", "tokens", "usd", "exceeded"), [
    ({}, 10**9, 19.99, False),  # under the operator's default ceiling of $20 per owner
    ({"llm_daily_token_budget": 1000}, 999, 0, False),
    ({"llm_daily_token_budget": 1000}, 1000, 0, True),
    ({"llm_daily_usd_budget": 0.5}, 10, 0.49, False),
    ({"llm_daily_usd_budget": 0.5}, 10, 0.5, True),
    ({"llm_daily_token_budget": 0}, 0, 0, True),
], ids=["no budgets", "tokens under", "tokens reached", "usd under", "usd reached",
        "zero budget blocks all calls"])
def test_a_spent_daily_budget_suspends_until_midnight_utc(project, settings, tokens, usd,
                                                           exceeded):
    set_project_settings(project, settings)
    add_usage(project, tokens, usd)
    add_usage(project, 10**6, 100, "date_trunc('day', now(), 'UTC') - interval '1 minute'")

    if not exceeded:
        check_budget(project)  # yesterday's spending does not count
        return
    with pytest.raises(Suspend) as caught:
        check_budget(project)
    assert caught.value.reason == "llm_budget"
    assert caught.value.wake_at == next_utc_midnight()


def test_the_operators_ceiling_per_owner_holds_over_every_project_budget(
        owner_and_project, monkeypatch):
    # Given an owner whose other project spent $25 today, and this project with no budget
    owner, project = owner_and_project
    other = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'other')",
               (other, owner))
    add_usage(other, 1000, 25)
    # When this project's job asks for a model (the ceiling: the shipped default, $20)
    with pytest.raises(Suspend) as caught:
        check_budget(project)
    # Then it waits for midnight UTC like any spent budget, and the reason names the ceiling
    assert (caught.value.reason, caught.value.wake_at) == ("llm_budget", next_utc_midnight())
    assert "SWITCHYARD_LLM_DAILY_USD_PER_OWNER" in (budget_status(project).exceeded or "")
    # And another owner's project is not held back by it; with the ceiling off, neither is this
    stranger = str(uuid.uuid4())
    pg.execute("INSERT INTO owners (id, name) VALUES (%s, %s)", (stranger, f"s-{stranger[:8]}"))
    theirs = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 't')",
               (theirs, stranger))
    check_budget(theirs)
    monkeypatch.setenv("SWITCHYARD_LLM_DAILY_USD_PER_OWNER", "0")
    get_settings.cache_clear()
    try:
        check_budget(project)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_a_malformed_budget_fails_loudly(project):
    set_project_settings(project, {"llm_daily_usd_budget": "lots"})

    with pytest.raises(PermanentError, match="llm_daily_usd_budget"):
        check_budget(project)


def test_call_llm_over_budget_does_not_reach_the_provider(fake_anthropic, project):
    set_project_settings(project, {"llm_daily_token_budget": 10})
    add_usage(project, 10, 0)

    with pytest.raises(Suspend):
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)

    assert fake_anthropic.count == 0


# --- the provider pause ----------------------------------------------------------

def paused_for_in_another_process(provider_name: str, model: str) -> float:
    code = ("from tasks.services.llm.flow import paused_for; "
            f"print(paused_for({provider_name!r}, {model!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy(),
                         capture_output=True, text=True, timeout=30, check=True)
    return float(out.stdout.strip())


def test_a_429_pauses_the_provider_for_every_worker(fake_anthropic, project):
    fake_anthropic.fail_next(1, 429, retry_after=30)

    with pytest.raises(ProviderBusy) as caught:
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)

    assert (caught.value.count_attempt, caught.value.delay) == (False, 30.0)
    assert 25 < paused_for_in_another_process("anthropic", MODEL) <= 30
    assert paused_for("scripted", MODEL) == 0.0  # only the provider that said 429
    # While paused, nobody calls it: the call is refused before any HTTP
    with pytest.raises(ProviderBusy) as refused:
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)
    assert refused.value.count_attempt is False and 25 < refused.value.delay <= 36
    assert fake_anthropic.count == 1
    assert tuples("SELECT count(*) FROM llm_usage")[0][0] == 0


def test_a_429_pauses_that_model_only(fake_anthropic, project):
    """A provider's rate limits are per model (Anthropic's and OpenAI's alike): a 429 on the
    model one role uses must not stop the jobs of another role, on another model."""
    fake_anthropic.fail_next(1, 429, retry_after=30)
    with pytest.raises(ProviderBusy):
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)
    assert 25 < paused_for_in_another_process("anthropic", MODEL) <= 30
    assert paused_for("anthropic", "claude-test-2") == 0.0

    other = call_llm(provider(fake_anthropic, "claude-test-2"), ask(), project_id=project,
                     job_id=None)
    assert other.model == "claude-test-2" and fake_anthropic.count == 2
    with pytest.raises(ProviderBusy):  # the paused one is still refused before any HTTP
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)
    assert fake_anthropic.count == 2


def test_an_overloaded_provider_pauses_all_its_models(fake_anthropic, project):
    """A 529 says the provider is overloaded, not that one model's limit is reached."""
    fake_anthropic.fail_next(1, 529, retry_after=30)
    with pytest.raises(ProviderBusy):
        call_llm(provider(fake_anthropic), ask(), project_id=project, job_id=None)
    assert 25 < paused_for_in_another_process("anthropic", "claude-test-2") <= 30
    with pytest.raises(ProviderBusy):  # refused before any HTTP
        call_llm(provider(fake_anthropic, "claude-test-2"), ask(), project_id=project,
                 job_id=None)
    assert fake_anthropic.count == 1
    assert paused_for("scripted", MODEL) == 0.0


def test_a_shorter_pause_does_not_end_a_longer_one(db):
    pause_provider("anthropic", MODEL, 20)
    pause_provider("anthropic", MODEL, 1)
    assert paused_for("anthropic", MODEL) > 19

    pause_provider("anthropic", MODEL, 40)
    assert paused_for("anthropic", MODEL) > 39


# --- end to end, through a real worker --------------------------------------------

def second_project(owner: str) -> str:
    project = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'other')",
               (project, owner))
    return project


def test_a_rate_limited_job_waits_out_the_pause_without_losing_an_attempt(
        worker, fake_anthropic, owner_and_project):
    # Given a provider that answers the first request with 429, retry-after 1 s
    owner, project = owner_and_project
    other_project = second_project(owner)
    fake_anthropic.fail_next(1, 429, retry_after=1)

    # When a job calls it, and a job of another project comes along during the pause
    first = new_job(project, "test.llm_call", {"base_url": fake_anthropic.url, "text": "one"})
    wait_until(lambda: fake_anthropic.count >= 1, what="the first call")
    # The fake counts the request before its 429 reaches the worker, which then records the
    # pause: wait for that (the pause lasts a second), not for the request alone.
    wait_until(lambda: paused_for("anthropic", MODEL) > 0, what="the provider's pause")
    second = new_job(other_project, "test.llm_call",
                     {"base_url": fake_anthropic.url, "text": "two"})

    # Then both complete, the 429 cost no attempt, and nobody called during the pause
    rows = [wait_for(first), wait_for(second)]
    assert [(r["status"], r["attempts"]) for r in rows] == [("completed", 1), ("completed", 1)]
    assert rows[0]["result"] == {"text": "Hello from the fake. You said: one", "tokens": 19}
    refused, *later = fake_anthropic.received
    assert refused.status == 429 and len(later) == 2
    assert all(r.status == 200 and r.at - refused.at >= 0.95 for r in later)
    assert max(r.at for r in later) - refused.at < 10
    assert status_history(first) == ["queued", "running", "queued", "running", "completed"]
    assert status_history(second) == ["queued", "running", "queued", "running", "completed"]
    assert tuples("SELECT count(*) FROM llm_usage WHERE job_id IN (%s, %s)",
                  (first, second))[0][0] == 2


def test_a_job_over_budget_waits_until_midnight(worker, fake_anthropic, project):
    set_project_settings(project, {"llm_daily_usd_budget": 1.0})
    add_usage(project, 100, 1.0)

    job_id = new_job(project, "test.llm_call", {"base_url": fake_anthropic.url})

    row = wait_for(job_id, "waiting")
    # Parked by the budget, not failed: the wait costs no attempt
    assert (row["wait_reason"], row["wake_at"], row["attempts"]) == (
        "llm_budget", next_utc_midnight(), 0)
    assert fake_anthropic.count == 0
    assert job(job_id)["last_error"] is None
