"""The offline provider knows no system: each system registers the answers to its purposes,
and the catalog imports them, so `switchyard up` runs every system with no key."""

from __future__ import annotations

import tasks.catalog  # noqa: F401 - the worker's and web's import: registers every answer
from tasks.services.llm import scripted
from tasks.services.llm.types import LLMRequest


def test_every_system_registers_its_answers_through_the_catalog() -> None:
    assert {"packet", "chat", "nightshift", "summary", "outline",  # the startup OS
            "planner.plan", "planner.revise", "agent.task",  # the planner
            "function_code",  # the functions
            "code.*"} <= set(scripted.ANSWERS)  # the coding agent's recorded sessions


def test_a_coding_purpose_is_answered_by_the_recorded_session_and_an_unknown_one_echoes() -> None:
    provider = scripted.ScriptedProvider()
    explore = provider.complete(LLMRequest(purpose="code.explore", system="",
                                           context={"task": "nothing"},
                                           messages=[{"role": "user", "content": "go"}]))
    assert explore.stop_reason == "end_turn" and not explore.text.startswith("[scripted]")
    echo = provider.complete(LLMRequest(purpose="nobody.answers", system="", messages=[
        {"role": "user", "content": "hello there"}]))
    assert echo.text == "[scripted] hello there"
