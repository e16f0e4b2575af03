"""Verification: which checks a repository answers to, output cut to size, debug mode's memory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tasks.coding.verify import (
    CARGO_TEST,
    DEBUG_SYSTEM_PROMPT,
    DEBUG_THRESHOLD,
    ESLINT,
    GO_TEST,
    MAKE_TEST,
    MAX_ERRORS,
    NPM_TEST,
    PYTEST,
    RUFF,
    Check,
    ErrorHistory,
    debug_prompt,
    detect_commands,
    failure_summary,
    jaccard,
    normalise_error,
    passed,
    runner_missing,
    truncate,
    verdict,
    verdict_notes,
)

NPM_DEFAULT = 'echo "Error: no test specified" && exit 1'

DETECTION = [
    pytest.param({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"}, [PYTEST],
                 id="pyproject [tool.pytest.ini_options]"),
    pytest.param({"pyproject.toml": "[tool.pytest]\nminversion = '9.0'\n"}, [PYTEST],
                 id="pyproject [tool.pytest] (pytest 9)"),
    pytest.param({"pytest.ini": "[pytest]\n"}, [PYTEST], id="pytest.ini"),
    pytest.param({"setup.cfg": "[metadata]\nname = x\n[tool:pytest]\ntestpaths = t\n"}, [PYTEST],
                 id="setup.cfg [tool:pytest]"),
    pytest.param({"tox.ini": "[tox]\nenvlist = py311\n[pytest]\naddopts = -q\n"}, [PYTEST],
                 id="tox.ini [pytest]"),
    pytest.param({"src/pkg/mod.py": "", "tests/test_mod.py": "def test(): pass\n"}, [PYTEST],
                 id="a test_*.py file anywhere"),
    pytest.param({"pkg/mod_test.py": ""}, [PYTEST], id="a *_test.py file"),
    pytest.param({"node_modules/x/test_x.py": "", "pkg/mod.py": ""}, [],
                 id="test files in node_modules are not the project's"),
    pytest.param({"pyproject.toml": "[project]\nname = 'x'\n", "setup.cfg": "[metadata]\n"}, [],
                 id="python without tests"),
    pytest.param({"pyproject.toml": "[tool.ruff]\nline-length = 100\n", "a.py": ""}, [RUFF],
                 id="ruff from pyproject"),
    pytest.param({"ruff.toml": "line-length = 100\n"}, [RUFF], id="ruff.toml"),
    pytest.param({".ruff.toml": ""}, [RUFF], id=".ruff.toml"),
    pytest.param({"package.json": json.dumps({"scripts": {"test": "vitest run"}})}, [NPM_TEST],
                 id="npm test"),
    pytest.param({"package.json": json.dumps({"scripts": {"test": NPM_DEFAULT}})}, [],
                 id="npm init's placeholder is not a test"),
    pytest.param({"package.json": json.dumps({"scripts": {"build": "tsc"}})}, [],
                 id="package.json without a test script"),
    pytest.param({"package.json": "{not json"}, [], id="a broken package.json"),
    pytest.param({"package.json": "{}", "eslint.config.mjs": "export default [];\n"}, [ESLINT],
                 id="eslint flat config"),
    pytest.param({".eslintrc.json": "{}"}, [ESLINT], id="eslint legacy config"),
    pytest.param({"package.json": json.dumps({"eslintConfig": {}})}, [ESLINT],
                 id="eslint config inside package.json"),
    pytest.param({"Cargo.toml": "[package]\nname = 'x'\n"}, [CARGO_TEST], id="cargo"),
    pytest.param({"go.mod": "module example.com/x\n"}, [GO_TEST], id="go"),
    pytest.param({"Makefile": "build:\n\tcc x.c\n\ntest: build\n\t./run-tests\n"}, [MAKE_TEST],
                 id="a Makefile with a test target"),
    pytest.param({"Makefile": "test := 1\nbuild:\n\tcc x.c\n"}, [],
                 id="a make variable named test is no target"),
    pytest.param({"pyproject.toml": "[tool.pytest.ini_options]\n[tool.ruff]\n",
                  "package.json": json.dumps({"scripts": {"test": "jest"}}),
                  "eslint.config.js": "", "Makefile": "test:\n\tpytest\n"},
                 [PYTEST, NPM_TEST, MAKE_TEST, RUFF, ESLINT], id="all at once, tests first"),
    pytest.param({"pyproject.toml": "[tool.pytest\nbroken"}, [], id="a broken pyproject"),
    pytest.param({"package.json": '{"scripts": ["test"]}', "pyproject.toml": "tool = 1\n"}, [],
                 id="odd shapes configure nothing"),
    pytest.param({"package.json": "[1, 2]"}, [], id="a package.json that is no object"),
]


@pytest.mark.parametrize(("files", "expected"), DETECTION)
def test_detect_commands(tmp_path: Path, files: dict[str, str], expected: list[Check]) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert detect_commands(tmp_path) == expected


def test_commands_need_no_console_scripts_and_leave_no_caches() -> None:
    assert PYTEST.command.startswith("python3 -m pytest -q")
    assert "no:cacheprovider" in PYTEST.command
    assert RUFF.command.startswith("python3 -m ruff check") and "--no-cache" in RUFF.command


@pytest.mark.parametrize(("check", "code", "ok"), [
    (PYTEST, 0, True), (PYTEST, 1, False),
    (PYTEST, 5, True),  # no tests collected: nothing failed
    (GO_TEST, 5, False), (RUFF, 1, False),
])
def test_passed(check: Check, code: int, ok: bool) -> None:
    assert passed(check, code) is ok


def test_truncate_leaves_short_output_alone() -> None:
    assert truncate("abc", 3) == "abc"


def split(cut: str) -> tuple[str, str, str]:
    head, marker_and_tail = cut.split("\n[… ", 1)
    marker, tail = marker_and_tail.split(" …]\n", 1)
    return head, marker, tail


OUTPUT = "".join(f"line {i:05d}\n" for i in range(2000))  # 22,000 chars


@pytest.mark.parametrize("limit", [400, 1000, 4000, 21_000])
def test_truncate_keeps_the_head_40_and_the_tail_50_percent(limit: int) -> None:
    cut = truncate(OUTPUT, limit)
    assert len(cut) <= limit
    head, marker, tail = split(cut)
    assert OUTPUT.startswith(head) and len(head) == limit * 4 // 10
    assert OUTPUT.endswith(tail) and len(tail) == limit * 5 // 10
    assert marker == f"{len(OUTPUT) - len(head) - len(tail)} characters cut"


def test_truncate_under_a_small_limit_shrinks_both_ends_alike() -> None:
    cut = truncate(OUTPUT, 200)  # the marker needs more than the 10 % left between the ends
    assert len(cut) == 200
    head, _, tail = split(cut)
    assert OUTPUT.startswith(head) and OUTPUT.endswith(tail)
    assert 0.7 < len(head) / len(tail) <= 0.8  # still 40:50


@pytest.mark.parametrize("limit", [0, 5, 20, 40, 60])
def test_truncate_never_exceeds_a_tiny_limit(limit: int) -> None:
    assert len(truncate("x" * 10_000, limit)) <= limit


RUN1 = """============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: /tmp/switchyard/workspaces/3f2a9c1e-8d4b-4c1a-9f3e-2b7d6a5c4e10/repo
collected 14 items

tests/test_cart.py ....F.........                                         [100%]

=================================== FAILURES ===================================
_____________________________ test_total_with_tax ______________________________

    def test_total_with_tax():
        cart = Cart(items=[Item("book", 12.5)])
>       assert cart.total(tax=0.2) == 15.0
E       AssertionError: assert 12.5 == 15.0
E        +  where 12.5 = <bound method Cart.total of <Cart object at 0x7f3a2b1c4d90>>(tax=0.2)

/tmp/sy/workspaces/3f2a9c1e-8d4b-4c1a-9f3e-2b7d6a5c4e10/repo/tests/test_cart.py:42: AssertionError
=========================== short test summary info ============================
FAILED tests/test_cart.py::test_total_with_tax - AssertionError: assert 12.5 == 15.0
========================= 1 failed, 13 passed in 0.84s =========================
"""
RUN2 = """============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: /tmp/switchyard/workspaces/91c0d2aa-1b2c-4d3e-8f90-a1b2c3d4e5f6/repo
collected 14 items

tests/test_cart.py ....F.........                                         [100%]

=================================== FAILURES ===================================
_____________________________ test_total_with_tax ______________________________

    def test_total_with_tax():
        cart = Cart(items=[Item("book", 12.5)])
>       assert cart.total(tax=0.2) == 15.0
E       AssertionError: assert 12.75 == 15.0
E        +  where 12.75 = <bound method Cart.total of <Cart object at 0x7f9e00a1b2c0>>(tax=0.2)

/tmp/sy/workspaces/91c0d2aa-1b2c-4d3e-8f90-a1b2c3d4e5f6/repo/tests/test_cart.py:44: AssertionError
=========================== short test summary info ============================
FAILED tests/test_cart.py::test_total_with_tax - AssertionError: assert 12.75 == 15.0
========================= 1 failed, 13 passed in 1.02s =========================
"""
OTHER = """============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: /tmp/switchyard/workspaces/91c0d2aa-1b2c-4d3e-8f90-a1b2c3d4e5f6/repo
collected 14 items

tests/test_cart.py ......F.......                                         [100%]

=================================== FAILURES ===================================
___________________________ test_discount_code_applies _________________________

    def test_discount_code_applies():
>       cart = Cart(items=[], discount=DiscountCode.parse("SAVE10"))
E       KeyError: 'percent'

shop/discounts.py:17: in parse
    return cls(rate=spec["percent"] / 100)

/tmp/switchyard/workspaces/91c0d2aa-1b2c-4d3e-8f90-a1b2c3d4e5f6/repo/shop/discounts.py:17: KeyError
=========================== short test summary info ============================
FAILED tests/test_cart.py::test_discount_code_applies - KeyError: 'percent'
========================= 1 failed, 13 passed in 0.91s =========================
"""
TB1 = '''Traceback (most recent call last):
  File "/tmp/tmpa1b2c3/repo/app/main.py", line 12, in <module>
    run()
  File "/tmp/tmpa1b2c3/repo/app/main.py", line 8, in run
    load_config("settings.toml")
  File "/tmp/tmpa1b2c3/repo/app/config.py", line 31, in load_config
    return Config(**data)
TypeError: Config.__init__() got an unexpected keyword argument 'timeout'
'''
TB2 = '''Traceback (most recent call last):
  File "/home/runner/work/x/repo/app/main.py", line 14, in <module>
    run()
  File "/home/runner/work/x/repo/app/main.py", line 9, in run
    load_config("settings.toml")
  File "/home/runner/work/x/repo/app/config.py", line 33, in load_config
    return Config(**data)
TypeError: Config.__init__() got an unexpected keyword argument 'timeout'
'''
TB_OTHER = '''Traceback (most recent call last):
  File "/tmp/tmpa1b2c3/repo/app/main.py", line 12, in <module>
    run()
  File "/tmp/tmpa1b2c3/repo/app/server.py", line 55, in serve
    sock.bind((host, port))
OSError: [Errno 98] Address already in use
'''


@pytest.mark.parametrize(("a", "b"), [
    pytest.param(RUN1, RUN2, id="pytest: other workspace, line, address, duration, value"),
    pytest.param(TB1, TB2, id="traceback: other directories and line numbers"),
])
def test_the_same_failure_in_a_new_run_compares_equal_enough(a: str, b: str) -> None:
    assert jaccard(normalise_error(a), normalise_error(b)) >= DEBUG_THRESHOLD


@pytest.mark.parametrize(("a", "b"), [
    pytest.param(RUN1, OTHER, id="pytest: another test, another exception"),
    pytest.param(TB1, TB_OTHER, id="traceback: another exception"),
    pytest.param(TB1, RUN1, id="a traceback and a test report"),
])
def test_different_failures_compare_below_the_threshold(a: str, b: str) -> None:
    assert jaccard(normalise_error(a), normalise_error(b)) < DEBUG_THRESHOLD


@pytest.mark.parametrize(("text", "gone", "kept"), [
    ("at /tmp/pytest-of-root/pytest-7/test_x0/app/models.py:12:5", ["pytest", "tmp", "test_x0"],
     ["models.py"]),
    ("<Foo object at 0x7f3a2b1c4d90> id=3f2a9c1e8d4b", ["0x7f3a2b1c4d90", "3f2a9c1e8d4b"],
     ["foo", "object"]),
    ("2024-05-01T12:30:45.123Z took 1.25s (450ms) pid 31337", ["2024", "took", "25s", "450ms"],
     ["took", "pid"]),
    (r"C:\\Users\\me\\AppData\\Local\\Temp\\tmpk2j3\\app\\views.py", ["users", "appdata", "temp"],
     ["views.py"]),
    ("/tmp/tmpa8x9q2/run.sh: line 3: foo: command not found", ["tmpa8x9q2"],
     ["run.sh", "foo", "command", "found"]),
])
def test_normalise_error(text: str, gone: list[str], kept: list[str]) -> None:
    words = normalise_error(text)
    assert all(k in words for k in kept), words
    assert not any(g in words for g in gone if g not in kept), words


def test_jaccard_edges() -> None:
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset({"a"}), frozenset()) == 0.0
    assert jaccard(frozenset({"a", "b"}), frozenset({"b", "c"})) == pytest.approx(1 / 3)


def test_error_history_flags_a_repeat_and_round_trips_through_json() -> None:
    history = ErrorHistory()
    assert history.add(TB1) is False  # the first of its kind
    assert history.add(OTHER) is False
    assert history.add(TB2) is True  # TB1 again, from another directory

    stored = json.loads(json.dumps(history.to_list()))
    again = ErrorHistory.from_list(stored)
    assert again.to_list() == history.to_list() and len(again) == 3
    assert again.add(RUN1) is False
    assert again.add(RUN2) is True


def test_error_history_keeps_the_latest_errors_each_cut() -> None:
    history = ErrorHistory()
    for i in range(MAX_ERRORS + 3):
        history.add(f"error number {i} " + "x" * 10_000)
    assert len(history) == MAX_ERRORS
    assert history.errors[-1].startswith(f"error number {MAX_ERRORS + 2}")
    assert all(len(e) <= 4000 for e in history.errors)


def test_debug_prompt_asks_for_the_root_cause_and_shows_the_history() -> None:
    history = ErrorHistory.from_list([TB1, "y" * 5000, TB2])
    prompt = debug_prompt(history, per_error=600)
    assert prompt.startswith(DEBUG_SYSTEM_PROMPT)
    for phrase in ("Stop patching symptoms", "hypotheses", "code path", "minimal reproduction"):
        assert phrase in DEBUG_SYSTEM_PROMPT
    assert prompt.count("<failure attempt=") == 3
    assert '<failure attempt="3">' in prompt and "unexpected keyword argument" in prompt
    assert "characters cut" in prompt and len(prompt) < len(DEBUG_SYSTEM_PROMPT) + 3 * 700


def test_failure_summary_shows_failures_cut_and_passes_briefly() -> None:
    results = [
        (PYTEST, 1, "head\n" + "noise\n" * 5000 + "1 failed, 3 passed in 0.5s\n"),
        (RUFF, 0, "All checks passed!"),
        (ESLINT, 2, ""),
    ]
    summary = failure_summary(results, limit=3000)
    assert len(summary) <= 3200
    assert "## pytest failed (exit code 1): `python3 -m pytest" in summary
    assert "1 failed, 3 passed" in summary and "characters cut" in summary
    assert "## eslint failed (exit code 2)" in summary and "(no output)" in summary
    assert "ruff: passed" in summary and "All checks passed!" not in summary


def test_failure_summary_when_everything_passed() -> None:
    assert failure_summary([(PYTEST, 5, "no tests ran"), (RUFF, 0, "")]) == \
        "pytest: passed\nruff: passed"
    assert failure_summary([]) == "No checks ran."


@pytest.mark.parametrize("text", ["/" * 19_000, "x" * 19_000, "a/" * 9_500, "1:" * 9_500])
def test_normalise_error_stays_linear_on_pathological_output(text: str) -> None:
    started = time.perf_counter()
    normalise_error(text)
    assert time.perf_counter() - started < 1.0  # a backtracking path pattern took minutes


def test_a_hostile_repositorys_config_files_are_never_followed_or_read_whole(tmp_path) -> None:
    import os

    from tasks.coding import verify

    outside = tmp_path / "worker-secret.toml"
    outside.write_text("[tool.pytest]\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    # A link to a file of the worker's configures nothing, and is not read
    (repo / "pyproject.toml").symlink_to(outside)
    (repo / "Cargo.toml").symlink_to(outside)
    # A FIFO does not block the worker; a huge file is not read into memory
    os.mkfifo(repo / "pytest.ini")
    (repo / "package.json").write_bytes(b'{"scripts": {"test": "x"}, "pad": "'
                                        + b"x" * (2 * 1024 * 1024) + b'"}')
    assert verify.detect_commands(repo) == []


@pytest.mark.parametrize(("check", "exit_code", "output", "names"), [
    (PYTEST, 1, "/usr/bin/python3: No module named pytest\n", ("pytest", "python3-pytest")),
    (RUFF, 1, "/run/switchyard-env/venv/bin/python3: No module named ruff", ("ruff",)),
    (CARGO_TEST, 127, "sh: 1: cargo: not found\n", ("cargo: not found",)),
])
def test_a_runner_that_is_not_installed_is_told_apart(check, exit_code, output, names):
    why = runner_missing(check, exit_code, output)
    assert why is not None and why.startswith(check.name)
    for name in names:
        assert name in why


@pytest.mark.parametrize(("check", "exit_code", "output"), [
    (PYTEST, 1, "E   ModuleNotFoundError: No module named 'pytest_mock'\n1 failed"),
    (PYTEST, 2, "ImportError while importing test module\nNo module named pytest_x"),
    (PYTEST, 1, "FAILED test_a.py::test_x - AssertionError\n1 failed in 0.1s"),
    (MAKE_TEST, 2, "make: *** [Makefile:2: test] Error 127"),
])
def test_a_check_that_ran_and_failed_is_not_a_missing_runner(check, exit_code, output):
    assert runner_missing(check, exit_code, output) is None


def _pytest_run(passed_ids: list[str], failed_ids: list[str]) -> dict:
    return {"name": "pytest", "command": PYTEST.command, "passed": not failed_ids,
            "tests": {"passed": passed_ids, "failed": failed_ids}}


def _opaque_run(name: str, ok: bool) -> dict:
    return {"name": name, "command": f"make {name}", "passed": ok, "tests": None}


BASELINE = [_pytest_run(["t::a"], ["t::fahrenheit", "t::freezing"])]


def test_a_failing_test_is_fixed_only_when_it_passes_now() -> None:
    fixed = verdict(BASELINE, [_pytest_run(["t::a", "t::fahrenheit", "t::freezing"], [])])
    assert fixed.passed and fixed.fixed == ["t::fahrenheit", "t::freezing"]
    # Skipped (a JUnit report names it neither passed nor failed) or deleted: not fixed
    skipped = verdict(BASELINE, [_pytest_run(["t::a"], [])])
    assert not skipped.passed and skipped.fixed == []
    assert skipped.unproven == ["t::fahrenheit", "t::freezing"]
    half = verdict(BASELINE, [_pytest_run(["t::a", "t::fahrenheit"], [])])
    assert not half.passed and half.fixed == ["t::fahrenheit"] and half.unproven == ["t::freezing"]


def test_a_check_that_ran_at_the_baseline_and_runs_no_more_is_failing() -> None:
    gone = verdict(BASELINE, [])
    assert not gone.passed and "[pytest]" in gone.unproven
    other = verdict([*BASELINE, _opaque_run("lint", True)], [_opaque_run("lint", True)])
    assert not other.passed and "[pytest]" in other.unproven


def test_a_check_without_a_report_still_failing_cannot_be_verified() -> None:
    # `make test` failed at the baseline (a LICENSE missing) and fails now, perhaps for new
    # reasons too: nothing tells; the tests with a report being fixed does not make it pass
    before = [*BASELINE, _opaque_run("test", False)]
    after = [_pytest_run(["t::a", "t::fahrenheit", "t::freezing"], []), _opaque_run("test", False)]
    judged = verdict(before, after)
    assert not judged.passed and judged.fixed == ["t::fahrenheit", "t::freezing"]
    assert judged.failing == ["[test]"]
    # ... while a reportless check that fails no more is fixed like a test
    cured = verdict(before, [after[0], _opaque_run("test", True)])
    assert cured.passed and "[test]" in cured.fixed


def test_why_a_round_is_not_verified_reads_in_the_summary() -> None:
    judged = verdict(BASELINE, [_pytest_run(["t::a"], [])])
    said = verdict_notes(judged)
    assert "t::fahrenheit" in said and "skipped or removed" in said
    assert verdict_notes(verdict(BASELINE, [_pytest_run(["t::a", "t::fahrenheit",
                                                         "t::freezing"], [])])) == ""


def test_a_check_that_timed_out_is_said_to_have_timed_out() -> None:
    summary = failure_summary([(PYTEST, None, ".")])
    assert "## pytest timed out: `python3 -m pytest" in summary
    assert "exit code None" not in summary


def test_a_commit_subject_is_cut_at_a_word_and_a_branch_keeps_accented_letters() -> None:
    from tasks.coding.git import branch_name
    from tasks.coding.pipeline import subject

    long = "fahrenheit() is off by 32 degrees for negative inputs: fix the conversion so the test"
    said = subject(long + " passes\nmore detail")
    assert len(said) <= 72 and said.endswith("…") and said[:-1] == long[:len(said) - 1]
    assert long[len(said) - 1] == " "  # cut where a word ends
    assert subject("Fix add\n\nbody") == "Fix add"
    assert branch_name("0123456789", "Ünïcode straße naïve") == \
        "switchyard/01234567-unicode-strae-naive"
