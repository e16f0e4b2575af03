"""Plans: the model's subtasks found in its reply, validated, errors naming where they are."""

from __future__ import annotations

import json

import pytest

from tasks.coding.plans import (
    MAX_SUBTASKS,
    PLAN_FORMAT,
    PLAN_SCHEMA,
    Plan,
    Subtask,
    fallback_plan,
    parse_plan,
    validate,
)

PLAN = {"subtasks": [
    {"title": "Add the parser", "description": "Parse the config file.", "files": ["cfg.py"]},
    {"title": "Wire it in", "description": "Call the parser from main."},
]}
EXPECTED = Plan((Subtask("Add the parser", "Parse the config file.", ("cfg.py",)),
                 Subtask("Wire it in", "Call the parser from main.")))
BARE = json.dumps(PLAN)


@pytest.mark.parametrize("reply", [
    pytest.param(BARE, id="bare JSON"),
    pytest.param(f"  \n{json.dumps(PLAN, indent=2)}\n", id="indented, blank lines around"),
    pytest.param(f"Here is my plan:\n```json\n{BARE}\n```\nI will start now.", id="```json fence"),
    pytest.param(f"```\n{BARE}\n```", id="plain fence"),
    pytest.param(f"The plan is {BARE} and then {{we}} go.", id="amid prose with braces after"),
    pytest.param(f'First {{"note": 1}} then {BARE}', id="another object first: the plan wins"),
    pytest.param(f"```json\n{{broken\n```\nfixed: {BARE}", id="a broken fence, the plan after"),
])
def test_a_valid_plan_is_found(reply: str) -> None:
    assert parse_plan(reply) == (EXPECTED, [])


INVALID = [
    pytest.param({"subtasks": []}, ["$.subtasks: must have 1 to 12 items, got 0"], id="empty"),
    pytest.param({"subtasks": [{"title": "t", "description": "d"}] * (MAX_SUBTASKS + 1)},
                 ["$.subtasks: must have 1 to 12 items, got 13"], id="too many"),
    pytest.param({"steps": []}, ["$: unexpected field 'steps' (allowed: subtasks)",
                                 "$: missing required field 'subtasks'"],
                 id="wrong key"),
    pytest.param({"subtasks": [{"title": "t"}]},
                 ["$.subtasks[0]: missing required field 'description'"], id="missing field"),
    pytest.param({"subtasks": [{"title": "t", "description": "d", "owner": "me"}]},
                 ["$.subtasks[0]: unexpected field 'owner' (allowed: description, files, title)"],
                 id="extra field"),
    pytest.param({"subtasks": [{"title": "", "description": "d"}]},
                 ["$.subtasks[0].title: must be 1 to 200 characters long, got 0"],
                 id="empty title, said once"),
    pytest.param({"subtasks": [{"title": "  \n", "description": "d"}]},
                 ["$.subtasks[0].title: must not be blank"], id="blank title"),
    pytest.param({"subtasks": [{"title": "t" * 201, "description": "d" * 4001}]},
                 ["$.subtasks[0].description: must be 1 to 4000 characters long, got 4001",
                  "$.subtasks[0].title: must be 1 to 200 characters long, got 201"],
                 id="too long, the value not echoed"),
    pytest.param({"subtasks": [{"title": "t", "description": 7, "files": "a.py"}]},
                 ["$.subtasks[0].description: must be a string, got a number",
                  "$.subtasks[0].files: must be an array, got a string"], id="wrong types"),
    pytest.param({"subtasks": [{"title": "t", "description": "d", "files": ["ok.py", 3]}]},
                 ["$.subtasks[0].files[1]: must be a string, got a number"], id="a bad file"),
    pytest.param([{"title": "t", "description": "d"}], ["$: must be an object, got an array"],
                 id="the list without its object"),
]


@pytest.mark.parametrize(("value", "errors"), INVALID)
def test_an_invalid_plan_is_refused_with_errors_naming_paths(value: object,
                                                             errors: list[str]) -> None:
    plan, found = parse_plan(f"Plan:\n```json\n{json.dumps(value)}\n```")
    assert plan is None
    assert found == errors
    assert all(len(e) < 200 for e in found)


def test_errors_come_in_document_order() -> None:
    subtasks = [{"title": "t", "description": "d"} for _ in range(11)]
    subtasks[2]["title"] = ""
    subtasks[10]["title"] = ""
    _, errors = parse_plan(json.dumps({"subtasks": subtasks}))
    assert [e.split(":")[0] for e in errors] == ["$.subtasks[2].title", "$.subtasks[10].title"]


@pytest.mark.parametrize(("reply", "detail"), [
    pytest.param("I could not make a plan.", "Expecting value", id="no JSON at all"),
    pytest.param('Plan: {"subtasks": [{"title": "a",}]}', "line 1 column 35",
                 id="a syntax error, located"),
    pytest.param('```json\n{"subtasks": [}\n```', "Expecting value", id="a broken fence"),
])
def test_a_reply_without_json_says_so_and_shows_the_shape(reply: str, detail: str) -> None:
    plan, errors = parse_plan(reply)
    assert plan is None and len(errors) == 1
    assert errors[0].startswith("$: no valid JSON object in the reply") and detail in errors[0]
    assert '{"subtasks": [{"title"' in errors[0]


def test_plan_round_trips_and_its_json_fits_the_schema() -> None:
    data = json.loads(json.dumps(EXPECTED.as_dict()))
    assert validate(data) == []
    assert Plan.from_dict(data) == EXPECTED
    assert data["subtasks"][1]["files"] == []


def test_from_dict_refuses_what_the_schema_refuses() -> None:
    with pytest.raises(ValueError, match=r"\$\.subtasks: must have 1 to 12 items"):
        Plan.from_dict({"subtasks": []})


def test_the_schema_is_strict() -> None:
    assert PLAN_SCHEMA["additionalProperties"] is False
    item = PLAN_SCHEMA["properties"]["subtasks"]["items"]
    assert item["additionalProperties"] is False and item["required"] == ["title", "description"]
    assert "subtasks" in PLAN_FORMAT


@pytest.mark.parametrize(("task", "title"), [
    ("Fix the login bug\nUsers see a 500 when ...", "Fix the login bug"),
    ("   ", "Complete the task."),
    ("x" * 500, "x" * 199 + "…"),
])
def test_fallback_plan_is_the_whole_task_and_valid(task: str, title: str) -> None:
    plan = fallback_plan(task)
    assert len(plan.subtasks) == 1 and plan.subtasks[0].title == title
    assert validate(plan.as_dict()) == []


def test_fallback_plan_cuts_a_long_task_to_the_limit() -> None:
    plan = fallback_plan("do this. " * 3000)
    assert len(plan.subtasks[0].description) <= 4000
    assert validate(plan.as_dict()) == []
