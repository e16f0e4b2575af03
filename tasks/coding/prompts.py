"""What the coding agent tells the model in each phase. Text only: no I/O, no state."""

from __future__ import annotations

import json
from typing import Any

from tasks.coding.plans import PLAN_SCHEMA

BASE = ("You are a careful senior software engineer working in a checkout of a repository. "
        "Paths are relative to the repository root. Use the tools; do not guess file "
        "contents. Keep changes small and focused on the task.")

EXPLORE = (BASE + " This is the exploration phase: you may only read. Find the code the task "
           "touches, how it is tested, and what could break. When you know enough, call "
           "`finish` with a short report: the relevant files, how they fit together, the test "
           "command, and the risks.")

PLAN = (BASE + " Break the task into the fewest subtasks that each leave the repository "
        "working. Answer with JSON only, matching this schema:\n"
        + json.dumps(PLAN_SCHEMA, indent=1))

BUILD = (BASE + " Do the subtask you are given: read before you edit, prefer `edit_file` for "
         "small changes, run the tests with `run` when useful. When the subtask is done, call "
         "`finish` with a one-paragraph summary of what you changed.")

FIX = (BASE + " The repository's checks failed after your changes. Read the failure, find the "
       "cause, fix it, and run the failing check again. Call `finish` when it passes or when "
       "you have done what you can, saying which.")

REVIEW = ("You review a change against the task it was made for; the repository has no test "
          "or build command to run, so your review stands in for one. Answer 'PASS' or "
          "'NEEDS WORK' on the first line, then why, in a few lines.")


def task_prompt(task: str, repo_map: str, extra: str = "") -> str:
    return (f"Task:\n{task}\n\nRepository map (the most referenced files first):\n"
            f"{repo_map or '(empty repository)'}\n{extra}")


def plan_prompt(task: str, repo_map: str, report: str) -> str:
    return task_prompt(task, repo_map, f"\nExploration report:\n{report}\n\nThe plan, as JSON:")


def plan_retry(errors: list[str]) -> str:
    return ("That plan does not match the schema:\n- " + "\n- ".join(errors)
            + "\nAnswer again with JSON only.")


def subtask_prompt(task: str, repo_map: str, report: str, subtask: dict[str, Any],
                   n: int, of: int) -> str:
    return task_prompt(task, repo_map,
                       f"\nExploration report:\n{report}\n\nSubtask {n} of {of}: "
                       f"{subtask['title']}\n{subtask['description']}")


def fix_prompt(task: str, failure: str, round_: int) -> str:
    return f"Task:\n{task}\n\nVerification round {round_} failed:\n{failure}"


def review_prompt(task: str, diff: str) -> str:
    return f"Task:\n{task}\n\nThe change (unified diff):\n{diff or '(no change)'}"
