"""SWITCHYARD_LLM_PROVIDER=openai: the real `openai` SDK against a local server speaking Chat
Completions (tests/support/fake_openai.py), plain, streamed and with tool calls, and a job
through a real worker whose calls pause every worker on a 429 (issue 27)."""

# ruff: noqa: F811 - the fake_openai fixture is imported, then requested by name

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from tasks.engine.errors import PermanentError, RetryableError
from tasks.engine.registry import JobType, register
from tasks.engine.retry import RetryPolicy
from tasks.services.llm import get_client, reset_client
from tasks.services.llm.errors import ProviderBusy
from tasks.services.llm.flow import call_llm, paused_for
from tasks.services.llm.openai_provider import OpenAIProvider, chat_messages
from tasks.services.llm.pricing import DEFAULT_PRICE, Price
from tasks.services.llm.types import LLMRequest, LLMResult, Usage
from tasks.settings import SettingsError, get_settings
from tests.integration.jobdb import new_job, status_history, tuples, wait_for
from tests.support.fake_openai import FakeOpenAI, fake_openai, settings_from  # noqa: F401

MODEL = "llama-3.1-8b-instruct"  # a self-hosted model: not in the price table
TOOLS = [{"name": "get_weather", "description": "The weather somewhere",
          "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}}}]


def provider(fake: FakeOpenAI, model: str = MODEL) -> OpenAIProvider:
    return OpenAIProvider(api_key="sk-openai-secret", base_url=fake.url, model=model,
                          timeout=5, max_tokens_cap=500)


def ask(text: str = "What should I build?", **fields) -> LLMRequest:
    return LLMRequest(purpose="chat", system="Be brief.",
                      messages=[{"role": "user", "content": text}], **fields)


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    get_settings.cache_clear()
    reset_client()
    yield
    get_settings.cache_clear()
    reset_client()


def test_complete_returns_text_usage_and_cost(fake_openai):
    result = provider(fake_openai, "gpt-4.1-mini").complete(ask("hi there", max_tokens=9000))

    assert result.text == "Hello from the fake. You said: hi there"
    assert (result.provider, result.model, result.stop_reason) == (
        "openai", "gpt-4.1-mini", "end_turn")
    assert result.usage == Usage(21, 9)
    assert result.cost_usd == Price(0.4, 1.6).cost(Usage(21, 9))  # its list price
    sent = fake_openai.received[0]
    assert sent.headers["Authorization"] == "Bearer sk-openai-secret"
    assert sent.body["messages"] == [{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "hi there"}]
    assert sent.body["max_tokens"] == 500 and sent.body["model"] == "gpt-4.1-mini"


def test_stream_hands_each_text_delta_to_on_text_and_reads_the_usage_chunk(fake_openai):
    pieces: list[str] = []

    result = provider(fake_openai).stream(ask("stream this please"), pieces.append)

    assert len(pieces) > 3
    assert "".join(pieces) == result.text == "Hello from the fake. You said: stream this please"
    assert result.usage == Usage(21, 9) and result.stop_reason == "end_turn"
    assert result.cost_usd == DEFAULT_PRICE.cost(Usage(21, 9))
    body = fake_openai.received[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_server_that_reports_no_usage_is_charged_an_estimate(fake_openai):
    fake_openai.usage = None
    result = provider(fake_openai).stream(ask("x" * 400), lambda _: None)
    assert result.usage.input_tokens >= 100 and result.usage.output_tokens > 0


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
def test_tool_calls_come_back_as_tool_calls_in_the_engines_words(fake_openai, streaming):
    fake_openai.tool_arguments = '{"location": "Paris", "units": "metric"}'
    req = ask("Weather in Paris?", tools=TOOLS)
    client = provider(fake_openai)

    result = client.stream(req, lambda _: None) if streaming else client.complete(req)

    assert result.stop_reason == "tool_use"  # what the agents' loops read
    assert [(c.name, c.input) for c in result.tool_calls] == [
        ("get_weather", {"location": "Paris", "units": "metric"})]
    assert result.tool_calls[0].id.startswith("call_")
    assert fake_openai.received[0].body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather somewhere",
        "parameters": TOOLS[0]["input_schema"]}}]


def test_broken_tool_arguments_reach_the_tool_instead_of_failing_the_call(fake_openai):
    fake_openai.tool_arguments = '{"location": "Par'  # a small model's cut-off JSON
    result = provider(fake_openai).complete(ask("Weather?", tools=TOOLS))
    assert result.tool_calls[0].input == {"_unparsed_arguments": '{"location": "Par'}


def test_a_tool_loop_turn_is_sent_as_tool_calls_and_tool_messages(fake_openai):
    # The coding agent's second turn: its call, then the tool's answer (one failed)
    turns = [
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Reading two files."},
            {"type": "tool_use", "id": "call_a", "name": "read_file", "input": {"path": "a.py"}},
            {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "b"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_a", "content": "print(1)"},
            {"type": "tool_result", "tool_use_id": "call_b", "is_error": True,
             "content": [{"type": "text", "text": "no such file"}]},
            {"type": "text", "text": "Go on."}]},
    ]
    provider(fake_openai).complete(LLMRequest(purpose="code", system="", messages=turns))

    assert fake_openai.received[0].body["messages"] == [
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "Reading two files.", "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
            {"id": "call_b", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "b"}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "print(1)"},
        {"role": "tool", "tool_call_id": "call_b", "content": "[error] no such file"},
        {"role": "user", "content": "Go on."}]


def test_an_image_block_is_refused_in_words():
    with pytest.raises(PermanentError, match="image"):
        chat_messages("", [{"role": "user", "content": [{"type": "image", "source": {}}]}])


@pytest.mark.parametrize(("status", "retry_after", "code", "expected", "counts", "delay"), [
    pytest.param(429, 2.5, "rate_limit_exceeded", ProviderBusy, False, 2.5,
                 id="429 waits its retry-after, no attempt"),
    pytest.param(429, None, "rate_limit_exceeded", ProviderBusy, False, 10.0,
                 id="no retry-after: the default wait"),
    pytest.param(429, None, "insufficient_quota", PermanentError, None, None,
                 id="429 out of quota: waiting will not help"),
    pytest.param(500, None, "server_error", RetryableError, True, None, id="5xx: a retry"),
    pytest.param(503, None, "overloaded", RetryableError, True, None, id="503: a retry"),
    pytest.param(400, None, "invalid_request", PermanentError, None, None, id="400"),
    pytest.param(401, None, "invalid_api_key", PermanentError, None, None, id="401"),
])
def test_api_errors_map_to_what_the_job_should_do(fake_openai, status, retry_after, code,
                                                  expected, counts, delay):
    fake_openai.fail_next(1, status, retry_after, code)

    with pytest.raises(expected) as caught:
        provider(fake_openai).complete(ask())

    assert type(caught.value) is expected
    if counts is not None:
        assert (caught.value.count_attempt, caught.value.delay) == (counts, delay)
    assert "sk-openai-secret" not in str(caught.value)


def test_an_unreachable_server_is_a_counted_retry(fake_openai):
    url = fake_openai.url
    fake_openai.close()
    with pytest.raises(RetryableError) as caught:
        OpenAIProvider(api_key="k", base_url=url, model=MODEL, timeout=2).complete(ask())
    assert type(caught.value) is RetryableError and caught.value.count_attempt


def test_get_client_builds_the_openai_provider_from_the_sdks_variables(
        monkeypatch, fresh_settings, fake_openai, caplog):
    monkeypatch.setenv("SWITCHYARD_LLM_PROVIDER", "openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("SWITCHYARD_LLM_MODEL", raising=False)
    get_settings.cache_clear()
    with pytest.raises(SettingsError, match="OPENAI_API_KEY"):
        get_client()

    # A self-hosted server: its URL, no key; the model defaults per provider unless named
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    get_settings.cache_clear()
    reset_client()
    assert (get_client().provider, get_client().model) == ("openai", "gpt-4.1-mini")
    monkeypatch.setenv("SWITCHYARD_LLM_MODEL", MODEL)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    get_settings.cache_clear()
    reset_client()
    caplog.set_level(logging.DEBUG)
    assert get_client().complete(ask("ping")).model == MODEL
    assert fake_openai.received[-1].headers["Authorization"] == "Bearer sk-openai-secret"
    assert "sk-openai-secret" not in repr(get_settings())
    assert "sk-openai-secret" not in caplog.text


def test_a_429_pauses_the_provider_for_every_worker_and_usage_is_recorded(fake_openai,
                                                                          project):
    fake_openai.fail_next(1, 429, retry_after=0.5)

    with pytest.raises(ProviderBusy):
        call_llm(provider(fake_openai), ask(), project_id=project, job_id=None)
    assert 0 < paused_for("openai", MODEL) <= 0.5 and paused_for("anthropic", MODEL) == 0.0
    with pytest.raises(ProviderBusy):  # refused before any HTTP while paused
        call_llm(provider(fake_openai), ask(), project_id=project, job_id=None)
    assert fake_openai.count == 1
    time.sleep(0.6)
    result = call_llm(provider(fake_openai), ask(), project_id=project, job_id=None)

    assert tuples("SELECT provider, model, input_tokens, output_tokens, cost_usd::float8 "
                  "FROM llm_usage WHERE project_id = %s", (project,)) == [
        ("openai", MODEL, 21, 9, result.cost_usd)]


@pytest.fixture
def openai_model(fake_openai: FakeOpenAI,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The LLM layer on the real openai SDK, pointed at the fake (the in-process worker
    reads the same settings)."""
    with settings_from(monkeypatch, {
            "SWITCHYARD_LLM_PROVIDER": "openai", "OPENAI_BASE_URL": fake_openai.url,
            "OPENAI_API_KEY": "sk-openai-secret", "SWITCHYARD_LLM_MODEL": MODEL}):
        yield fake_openai


class Ask(BaseModel):
    text: str = "hello"


def configured_call(ctx, p: Ask) -> dict:
    """A step that asks whatever model the operator configured (get_client)."""
    stored = ctx.step("llm", lambda: call_llm(get_client(), ask(p.text), project_id=ctx.project_id,
                                              job_id=ctx.job_id).as_dict())
    return {"text": LLMResult.from_dict(stored).text}


# max_attempts=1: if the 429 used up an attempt, the job would fail instead of completing.
register(JobType("test.llm_configured", Ask, configured_call, max_attempts=1,
                 retry_policy=RetryPolicy(base_seconds=0.05, max_seconds=0.1)))


def test_a_job_on_the_openai_provider_waits_out_a_429_through_a_real_worker(
        worker, openai_model, project):
    fake = openai_model
    fake.fail_next(1, 429, retry_after=0.5)
    fake.text = "a haiku about tides"

    job_id = new_job(project, "test.llm_configured", {"text": "write a haiku"})
    row = wait_for(job_id, timeout=30)

    assert (row["status"], row["attempts"]) == ("completed", 1), row  # the 429 cost nothing
    assert row["result"] == {"text": "a haiku about tides"}
    refused, answered = fake.received
    assert refused.status == 429 and answered.status == 200
    assert answered.at - refused.at >= 0.45
    assert status_history(job_id) == ["queued", "running", "queued", "running", "completed"]
    assert tuples("SELECT provider, model, input_tokens FROM llm_usage WHERE job_id = %s",
                  (job_id,)) == [("openai", MODEL, 21)]
