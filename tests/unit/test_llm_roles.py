"""Models by role (issue 27): which provider and model a call's role gets, pure logic."""

from __future__ import annotations

import pytest

from tasks.services.llm.roles import (
    Choice,
    choose,
    offered,
    operator_choices,
    project_allowed,
    role_of,
)
from tasks.settings import SettingsError

DEFAULT = Choice("anthropic", "claude-sonnet-4-6")


@pytest.mark.parametrize(("purpose", "role"), [
    ("code.plan", "plan"), ("planner.revise", "plan"), ("code.debug", "build"),
    ("code.explore", "explore"), ("chat", "chat"), ("function_llm", "function"),
    ("outline", "report"), ("someone.else", None),
])
def test_a_purpose_names_its_role(purpose, role):
    assert role_of(purpose) == role


def test_the_project_beats_the_operator_who_beats_the_default():
    operator = {"plan": ("", "claude-opus-4-6"), "build": ("openai", "")}
    assert choose("plan", DEFAULT, operator, None) == Choice("anthropic", "claude-opus-4-6")
    # another provider without a model: that provider's default model, not this one's
    assert choose("build", DEFAULT, operator, None) == Choice("openai", "gpt-4.1-mini")
    assert choose("build", DEFAULT, operator, {"build": {"model": "gpt-4.1"}}) == Choice(
        "openai", "gpt-4.1")
    assert choose("plan", DEFAULT, operator, {"plan": {"provider": "scripted"}}) == Choice(
        "scripted", "scripted-1")
    assert choose("chat", DEFAULT, operator, {"plan": None, "chat": None}) == DEFAULT
    assert choose(None, DEFAULT, operator, {"plan": {"model": "x"}}) == DEFAULT


def test_the_operators_role_variables_are_checked():
    assert operator_choices((("PLAN", "", "claude-opus-4-6"),)) == {
        "plan": ("", "claude-opus-4-6")}
    with pytest.raises(SettingsError, match="no role 'plann'"):
        operator_choices((("PLANN", "", "m"),))
    with pytest.raises(SettingsError, match="must be one of"):
        operator_choices((("PLAN", "gemini", ""),))


def test_a_project_may_pick_only_what_the_operator_runs_or_lists():
    operator = {"plan": ("", "claude-opus-4-6")}
    listed = ("openai/gpt-4.1",)
    assert project_allowed(DEFAULT, DEFAULT, operator, ())
    assert project_allowed(Choice("anthropic", "claude-opus-4-6"), DEFAULT, operator, ())
    assert project_allowed(Choice("openai", "gpt-4.1"), DEFAULT, operator, listed)
    assert not project_allowed(Choice("anthropic", "claude-opus-4-1"), DEFAULT, operator,
                               listed)
    assert not project_allowed(Choice("openai", "o1-pro"), DEFAULT, operator, listed)


def test_what_a_project_is_offered_is_what_it_may_pick():
    operator = {"plan": ("", "claude-opus-4-6"), "build": ("openai", ""), "chat": ("", "")}
    listed = ("openai/gpt-4.1", "openai/meta-llama/Llama-3.1-8B", "anthropic/claude-opus-4-6",
              "nonsense")
    choices = offered(DEFAULT, operator, listed)
    assert choices == [DEFAULT, Choice("anthropic", "claude-opus-4-6"),
                       Choice("openai", "gpt-4.1-mini"), Choice("openai", "gpt-4.1"),
                       Choice("openai", "meta-llama/Llama-3.1-8B")]  # each once, in order
    assert all(project_allowed(c, DEFAULT, operator, listed) for c in choices)
