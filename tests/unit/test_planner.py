"""The planner's pure parts: a plan's schema and DAG rules, the prompter, the role map and
the watcher's statuses."""

from __future__ import annotations

import json

import pytest

from tasks.planner import roles
from tasks.planner.prompter import Prior, build_prompt, file_tree_summary, render_output
from tasks.planner.schema import check, parse_answer
from tasks.planner.watch import task_states
from tasks.workflows.dag import StepState


def t(id_: str, *deps: str, role: str = "writer") -> dict:
    return {"id": id_, "description": f"do {id_}", "assigned_to": role, "depends_on": list(deps)}


def test_a_valid_plan_parses_from_a_fenced_answer_amid_prose():
    text = "Sure!\n```json\n" + json.dumps({"tasks": [t("a"), t("b", "a")]}) + "\n```\nDone."
    tasks, errors = parse_answer(text)
    assert errors == [] and [(x.id, x.depends_on) for x in tasks] == [("a", ()), ("b", ("a",))]


@pytest.mark.parametrize(("value", "expected"), [
    ({"tasks": []}, "$.tasks: must have 1 to 30 items"),  # an empty plan reaches nothing
    ({"tasks": [t("A")]}, "is not a task id"),  # ids become DAG node names
    ({"tasks": [t("a", role="Lead Dev")]}, "is not a role"),
    ({"tasks": [{**t("a"), "title": "x"}]}, "unexpected field 'title'"),  # one shape, strictly
    ({"tasks": [{"id": "a", "description": "x", "assigned_to": "w"}]},
     "missing required field 'depends_on'"),
    ({"tasks": [t("a"), t("a")]}, "also the id of $.tasks[0]"),
    ({"tasks": [t("a", "a")]}, "depends on itself"),
    ({"tasks": [t("a", "ghost")]}, "no task has the id 'ghost'"),
    ({"tasks": [t("a", "b", "b"), t("b")]}, "'b' is listed more than once"),
    ({"tasks": [t("a", "c"), t("b", "a"), t("c", "b")]}, "cycle a → c → b → a"),
    ("not an object", "must be an object"),
])
def test_each_rule_names_what_is_wrong(value, expected):
    tasks, errors = check(value)
    assert tasks == []
    assert any(expected in e for e in errors), errors


def test_schema_and_dag_problems_are_reported_together():
    _, errors = check({"tasks": [t("a", "zz", role="X"), t("b", "a")]})
    assert any("is not a role" in e for e in errors)
    assert any("'zz'" in e for e in errors)


def test_a_revision_may_depend_on_kept_tasks_but_not_reuse_their_ids():
    tasks, errors = check({"tasks": [t("fix", "research")]}, kept=["research"])
    assert errors == [] and tasks[0].depends_on == ("research",)
    _, errors = check({"tasks": [t("research")]}, kept=["research"])
    assert any("completed task's id" in e for e in errors)


def test_an_answer_with_no_json_says_what_shape_is_expected():
    _, errors = parse_answer("I would rather not.")
    assert len(errors) == 1 and '"tasks"' in errors[0]


def test_the_prompt_holds_the_goal_the_task_the_prerequisites_outputs_and_the_tree():
    prompt = build_prompt("Ship it", "review", "Review the draft",
                          [Prior("draft", "Write a draft\nlong", {"text": "DRAFT TEXT"}),
                           Prior("data", "Numbers", {"rows": 3})],
                          file_tree="README.md\nsrc/app.py")
    assert "Overall goal: Ship it" in prompt and "Your task (review): Review the draft" in prompt
    assert "### draft: Write a draft\nDRAFT TEXT" in prompt
    assert '{"rows": 3}' in prompt and "src/app.py" in prompt
    assert "repository" not in build_prompt("g", "a", "b", [])


def test_outputs_are_capped_and_big_trees_summarised_by_directory():
    assert render_output("x" * 5000, 100).endswith("…") and len(render_output("x" * 5000, 100)) \
        == 100
    assert render_output(None) == "(no output)"
    files = [f"src/m{i}.py" for i in range(300)] + ["README.md"]
    tree = file_tree_summary(files, limit=20)
    assert tree.splitlines()[0] == "301 files; by top-level entry:"
    assert "src/ (300 files)" in tree and "README.md" in tree
    assert len(tree.splitlines()) <= 20
    assert file_tree_summary([]) == "(the repository is empty)"


def test_roles_go_to_their_job_types_and_fall_back_to_the_agent_with_a_reason():
    facts = roles.Facts(repo_url="https://github.com/o/r.git", github_repo="o/r")
    code = roles.dispatch("engineer", "PROMPT", "Fix the bug", facts, roles.DEFAULT_ROLES)
    assert code.job_type == "code.run_task" and code.payload == {
        "repo_url": "https://github.com/o/r.git", "task": "PROMPT", "github_repo": "o/r"}
    qa = roles.dispatch("qa", "P", "Check https://example.com/signup.", facts,
                        roles.DEFAULT_ROLES)
    assert qa.payload == {"url": "https://example.com/signup"}
    research = roles.dispatch("researcher", "P", "Market size\nmore", facts,
                              roles.DEFAULT_ROLES)
    assert research.payload == {"topic": "Market size"}
    no_repo = roles.dispatch("engineer", "P", "Fix", roles.Facts(), roles.DEFAULT_ROLES)
    assert no_repo.job_type == "agent.task" and "repo_url" in (no_repo.note or "")
    other = roles.dispatch("poet", "P", "Write", facts, roles.DEFAULT_ROLES)
    assert other.job_type == "agent.task" and other.payload == {"prompt": "P", "role": "poet"}
    mapped = roles.dispatch("poet", "P", "Write", facts, {"poet": "verse.write"})
    assert (mapped.job_type, mapped.payload) == ("verse.write", {"prompt": "P"})


def test_with_complete_on_merge_a_coding_task_waits_for_its_pull_requests_merge():
    facts = roles.Facts("https://github.com/o/r.git", "o/r", complete_on_merge=True)
    code = roles.dispatch("engineer", "P", "Fix", facts, roles.DEFAULT_ROLES)
    assert code.job_type == "code.run_task_until_merged" and code.payload["github_repo"] == "o/r"
    # without a GitHub repository no pull request is opened: nothing to wait for
    local = roles.Facts("https://github.com/o/r.git", None, complete_on_merge=True)
    assert roles.dispatch("engineer", "P", "Fix", local, roles.DEFAULT_ROLES).job_type == \
        "code.run_task"


def test_the_watcher_marks_ready_and_blocked_from_the_prerequisites():
    deps = {"a": [], "b": ["a"], "c": ["b"], "d": ["a"], "e": []}
    steps = {"a": StepState("completed", job_id="j1", output={"text": "A"}),
             "b": StepState("failed", job_id="j2", error="boom"),
             "c": StepState("pending"), "d": StepState("pending"),
             "e": StepState("running", job_id="j5")}
    states = task_states(steps, deps)
    assert {k: v["status"] for k, v in states.items()} == {
        "a": "completed", "b": "failed", "c": "blocked", "d": "ready", "e": "in_progress"}
    assert states["b"]["error"] == "boom" and states["a"]["output"] == {"text": "A"}
    canceled = task_states({"x": StepState("canceled")}, {"x": [], "y": ["x"]})
    assert canceled["x"]["status"] == "blocked" and canceled["y"]["status"] == "blocked"
