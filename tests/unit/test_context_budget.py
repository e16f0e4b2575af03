"""The context budget: conversations shortened to fit, and still valid for the Messages API."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.coding.context_budget import (
    CHARS_PER_TOKEN,
    estimate_tokens,
    fit,
    summarise,
)

Message = dict[str, Any]
TOOLS = ["read_file", "write_file", "run", "search", "list_files"]


def assert_valid(messages: list[Message]) -> None:
    """The Messages API's rules: a user turn first, turns alternating, every tool_use answered
    by a tool_result in the next user turn and every tool_result answering one before it."""
    assert messages and messages[0]["role"] == "user"
    for i, message in enumerate(messages):
        assert message["role"] == ("user" if i % 2 == 0 else "assistant")
        content = message["content"]
        blocks = content if isinstance(content, list) else []
        uses = {b["id"] for b in blocks if b["type"] == "tool_use"}
        results = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
        if message["role"] == "assistant":
            assert not results
            if uses and i + 1 < len(messages):
                answered = messages[i + 1]["content"]
                assert isinstance(answered, list)
                assert {b["tool_use_id"] for b in answered if b["type"] == "tool_result"} == uses
        else:
            assert not uses
            if results:
                before = messages[i - 1]["content"]
                assert i > 0 and isinstance(before, list)
                assert results == {b["id"] for b in before if b["type"] == "tool_use"}


def conversation(rounds: list[tuple[str, list[tuple[str, int, bool]]]]) -> list[Message]:
    """A task, then per round an assistant turn (text and tool calls) and the user turn that
    answers it (the tool results, or text when there were no calls)."""
    messages: list[Message] = [{"role": "user", "content": "Task: make the tests pass."}]
    n = 0
    for text, calls in rounds:
        uses, results = [], []
        for tool, size, error in calls:
            n += 1
            uses.append({"type": "tool_use", "id": f"toolu_{n:03d}", "name": tool,
                         "input": {"path": f"src/file_{n}.py", "content": "w" * (size // 3)}})
            results.append({"type": "tool_result", "tool_use_id": f"toolu_{n:03d}",
                            "content": "o" * size, **({"is_error": True} if error else {})})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": text}, *uses]})
        messages.append({"role": "user", "content": results or "Go on."})
    return messages


calls = st.lists(st.tuples(st.sampled_from(TOOLS), st.integers(0, 6000), st.booleans()),
                 max_size=3)
rounds = st.lists(st.tuples(st.text(max_size=200), calls), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(rounds=rounds, budget=st.integers(50, 40_000), keep_last=st.integers(1, 8),
       keep_first=st.booleans())
def test_fit_keeps_the_conversation_valid_and_within_budget_when_it_can(
        rounds: list[tuple[str, list[tuple[str, int, bool]]]], budget: int, keep_last: int,
        keep_first: bool) -> None:
    messages = conversation(rounds)
    before = copy.deepcopy(messages)

    fitted = fit(messages, budget, keep_last=keep_last, keep_first=keep_first)

    assert messages == before  # pure
    assert_valid(fitted)
    smallest = fit(messages, 0, keep_last=keep_last, keep_first=keep_first)
    assert estimate_tokens(fitted) <= max(budget, estimate_tokens(smallest))
    assert fitted[-1] == messages[-1]  # the latest turn is never touched
    if keep_first:
        assert fitted[0]["content"] == messages[0]["content"] or \
            fitted[0]["content"][0]["text"] == messages[0]["content"]
    if estimate_tokens(messages) <= budget:
        assert fitted == messages


def test_under_budget_nothing_changes() -> None:
    messages = conversation([("look", [("read_file", 5000, False)])])
    assert fit(messages, estimate_tokens(messages)) == messages


def test_old_tool_output_is_stubbed_first_and_the_latest_kept() -> None:
    messages = conversation([(f"step {i}", [("read_file", 4000, False)]) for i in range(6)])
    budget = estimate_tokens(messages) - 2000  # room made by stubbing two or three old outputs

    fitted = fit(messages, budget, keep_last=4)

    assert len(fitted) == len(messages)
    assert fitted[2]["content"][0]["content"] == "[output of read_file elided; 4000 chars]"
    assert fitted[-1] == messages[-1] and fitted[-3] == messages[-3]
    assert fitted[-5]["content"][0]["content"] == "o" * 4000  # not needed: left alone
    assert estimate_tokens(fitted) <= budget


def test_long_tool_inputs_are_stubbed_too() -> None:
    messages = conversation([("write", [("write_file", 9000, False)]), ("done", [])])
    fitted = fit(messages, estimate_tokens(messages) // 3, keep_last=2)
    assert fitted[1]["content"][1]["input"] == {"path": "src/file_1.py",
                                                "content": "[3000 chars elided]"}


def test_the_oldest_turns_give_way_to_a_summary_after_the_task() -> None:
    messages = conversation([(f"step {i}", [("read_file", 200, False), ("run", 250, i == 1)])
                             for i in range(12)])
    fitted = fit(messages, estimate_tokens(messages) // 2, keep_last=4)

    assert_valid(fitted)
    assert len(fitted) < len(messages)
    assert fitted[-4:] == messages[-4:]
    task, summary = fitted[0]["content"]
    assert task == {"type": "text", "text": "Task: make the tests pass."}
    assert summary["text"].startswith("[")
    assert "- read_file src/file_1.py\n- run src/file_2.py\n" in summary["text"]
    assert "- run src/file_4.py (failed)" in summary["text"]
    assert estimate_tokens(fitted) <= estimate_tokens(messages) // 2


def test_without_keep_first_the_summary_is_the_first_message() -> None:
    messages = conversation([(f"step {i}", [("search", 300, False)]) for i in range(10)])
    fitted = fit(messages, estimate_tokens(messages) // 2, keep_last=2, keep_first=False)
    assert_valid(fitted)
    assert fitted[0]["role"] == "user" and isinstance(fitted[0]["content"], str)
    assert "earlier messages were removed" in fitted[0]["content"]


def test_a_budget_too_small_for_the_last_turns_gives_the_smallest_valid_conversation() -> None:
    messages = conversation([("a", [("read_file", 8000, False)]), ("b", [("run", 8000, False)])])
    fitted = fit(messages, 10, keep_last=6)
    assert_valid(fitted)
    assert fitted[-1] == messages[-1]
    assert estimate_tokens(fitted) < estimate_tokens(messages)


@pytest.mark.parametrize(("messages", "system", "expected_chars"), [
    ([], "", 0),
    ([], "x" * 400, 400),
    ([{"role": "user", "content": "abcd"}], "", 16 + len('"abcd"')),
])
def test_estimate_tokens_is_characters_over_four(messages: list[Message], system: str,
                                                 expected_chars: int) -> None:
    assert estimate_tokens(messages, system) == -(-expected_chars // CHARS_PER_TOKEN)


def test_the_system_prompt_counts_against_the_budget() -> None:
    messages = conversation([(f"s{i}", [("read_file", 2000, False)]) for i in range(4)])
    budget = estimate_tokens(messages)
    assert fit(messages, budget) == messages
    assert fit(messages, budget, system="s" * 4000) != messages


def test_summary_caps_the_calls_it_lists() -> None:
    text = summarise(conversation([("x", [("run", 1, False)] * 3)] * 20))
    assert text.count("\n- ") == 41 and "- … and 20 more" in text
