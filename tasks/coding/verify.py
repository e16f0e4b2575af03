"""How the agent checks its work: the commands a repository answers to, their output cut to what
a model can read, and what goes back to the model after a failed round."""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from tasks.coding.repo_files import json_file as _json
from tasks.coding.repo_files import regular as _regular
from tasks.coding.repo_files import table as _table
from tasks.coding.repo_files import text as _text
from tasks.coding.repo_files import toml as _toml

# Places that hold someone else's code or generated files: their tests are not the project's.
_SKIP_DIRS = frozenset({"node_modules", "vendor", "third_party", "dist", "build", "target",
                        "site-packages", "__pycache__", "venv", "env"})
_TEST_FILES_SCANNED = 20_000  # a walk for test_*.py gives up after this many files
# What `npm init` writes when there are no tests: running it can only fail.
_NPM_PLACEHOLDER = "no test specified"
_MAKE_TEST_TARGET = re.compile(r"^test\s*:(?!=)", re.MULTILINE)  # `test:`, not `test := x`
_ESLINT_CONFIGS = (
    "eslint.config.js", "eslint.config.mjs", "eslint.config.cjs", "eslint.config.ts",
    "eslint.config.mts", "eslint.config.cts", ".eslintrc", ".eslintrc.js", ".eslintrc.cjs",
    ".eslintrc.json", ".eslintrc.yml", ".eslintrc.yaml",
)


@dataclass(frozen=True)
class Check:
    name: str
    command: str
    report: str | None = None  # a JUnit XML file the command writes, relative to the checkout


# `python3 -m` so a console script missing from PATH does not matter; no caches, which would
# otherwise land in the workspace and so in the patch.
REPORTS = ".switchyard-reports"  # never part of a change (tasks.coding.loop.JUNK)
PYTEST = Check("pytest", f"python3 -m pytest -q -p no:cacheprovider "
               f"--junitxml={REPORTS}/pytest.xml", report=f"{REPORTS}/pytest.xml")
# node's own test runner (node --test, under any npm script) also writes a JUnit report; the
# spec reporter still writes what the model reads. Other runners ignore the option.
NODE_REPORT = f"{REPORTS}/node.xml"
NPM_TEST = Check("npm test", f'mkdir -p {REPORTS} && NODE_OPTIONS="--test-reporter=spec '
                 f'--test-reporter-destination=stdout --test-reporter=junit '
                 f'--test-reporter-destination={NODE_REPORT}" npm test', report=NODE_REPORT)
CARGO_TEST = Check("cargo test", "cargo test")
GO_TEST = Check("go test", "go test ./...")
MAKE_TEST = Check("make test", "make test")
RUFF = Check("ruff", "python3 -m ruff check --no-cache .")
# --no-install: without a local eslint npx would fetch one, and the sandbox has no network.
ESLINT = Check("eslint", "npx --no-install eslint .")


def detect_commands(root: Path) -> list[Check]:
    """The checks the repository at `root` is set up for: test runners first, then linters.

    Every runner found is listed, a Makefile's `test` target too, even where it may run the
    same tests again: which one a project really uses cannot be told from its files.
    """
    tools = _table(_toml(root / "pyproject.toml").get("tool"))
    package = _table(_json(root / "package.json"))
    checks: list[Check] = []
    if _uses_pytest(root, tools):
        checks.append(PYTEST)
    test_script = _table(package.get("scripts")).get("test")
    if isinstance(test_script, str) and test_script.strip() \
            and _NPM_PLACEHOLDER not in test_script:
        checks.append(NPM_TEST)
    if _regular(root / "Cargo.toml"):
        checks.append(CARGO_TEST)
    if _regular(root / "go.mod"):
        checks.append(GO_TEST)
    if any(_MAKE_TEST_TARGET.search(_text(root / name))
           for name in ("GNUmakefile", "makefile", "Makefile")):
        checks.append(MAKE_TEST)
    if "ruff" in tools or _regular(root / "ruff.toml") \
            or _regular(root / ".ruff.toml"):
        checks.append(RUFF)
    if any(_regular(root / name) for name in _ESLINT_CONFIGS) \
            or "eslintConfig" in package:
        checks.append(ESLINT)
    return checks


_PYTHON_MODULE = re.compile(r"^python3 -m ([\w.]+)")
_APT = {"pytest": "python3-pytest", "ruff": "ruff"}


def runner_missing(check: Check, exit_code: int | None, output: str) -> str | None:
    """Why `check` could not start at all (its runner is not installed where the sandbox
    looks), or None. Such a failure says nothing of the code: it is set aside, with the fix,
    never handed to the model to "fix" round after round."""
    module = _PYTHON_MODULE.match(check.command)
    name = module.group(1) if module else ""
    # python3's own words when -m finds no such module (a test's failed import quotes it)
    if module and exit_code == 1 and re.search(rf"No module named {re.escape(name)}\s*$",
                                               output, re.MULTILINE):
        return (f"{check.name}: {name} is not installed for the repository's python3: declare "
                f"it in the repository's test or dev requirements, or install the system's "
                f"(apt-get install {_APT.get(name, 'python3-' + name)})")
    if exit_code == 127:  # the shell's "command not found"
        said = next((line.strip() for line in output.splitlines() if "not found" in line),
                    "command not found")
        return f"{check.name}: its runner is not installed ({said[:200]})"
    return None


def passed(check: Check, exit_code: int | None) -> bool:
    """Whether a check's exit code means success. pytest's 5 is "no tests collected": nothing
    failed, and a repository without tests must not keep the agent failing forever."""
    return exit_code == 0 or (check.command == PYTEST.command and exit_code == 5)


REPORT_MAX_BYTES = 8 * 1024 * 1024


def junit_tests(xml: str) -> tuple[list[str], list[str]] | None:
    """(passed, failed) test ids ("classname::name") from a JUnit XML report; None when the
    text is no such report. A skipped test is neither."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError:
        return None
    passed, failed = [], []
    for case in root.iter("testcase"):
        name = f"{case.get('classname') or ''}::{case.get('name') or ''}"
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            failed.append(name)
        elif "skipped" not in kinds:
            passed.append(name)
    return passed, failed


def failing(results: list[dict[str, Any]]) -> set[str]:
    """What failed in one run of the checks: each failed test by name where the check wrote a
    report, else the check itself (and a check that failed with no test failing, e.g. a
    collection error, as itself too)."""
    out: set[str] = set()
    for r in results:
        tests = r.get("tests")
        if tests is not None:
            out.update(tests["failed"])
        if not r["passed"] and not (tests and tests["failed"]):
            out.add(f"[{r['name']}]")
    return out


def passing(results: list[dict[str, Any]]) -> set[str]:
    """What passed in one run: each passed test by name where the check wrote a report, and
    each check that passed as itself."""
    out: set[str] = set()
    for r in results:
        tests = r.get("tests")
        if tests is not None:
            out.update(tests["passed"])
        if r["passed"]:
            out.add(f"[{r['name']}]")
    return out


@dataclass(frozen=True)
class Verdict:
    passed: bool
    fixed: list[str]  # failed at the baseline, pass now
    broken: list[str]  # did not fail at the baseline, fail now
    failing: list[str]  # fail now
    # failed at the baseline and neither fail nor pass now (skipped, deleted), and checks
    # that ran at the baseline and run no more: never counted as fixed
    unproven: list[str] = field(default_factory=list)


def verdict(baseline: list[dict[str, Any]] | None, results: list[dict[str, Any]]) -> Verdict:
    """Every check passes; or, where the baseline already failed, nothing that did not fail
    then fails now and what the task was about (a test that failed then) passes now.

    A test is fixed when it passes, not when it stops failing: skipping the failing tests or
    deleting them turned every red suite "verified". A check without a report that still
    fails hides whatever else now fails inside it, so it keeps the round unverified."""
    now, green = failing(results), passing(results)
    before = failing(baseline) if baseline is not None else set()
    ran_before = {f"[{r['name']}]" for r in baseline or ()}
    gone = ran_before - {f"[{r['name']}]" for r in results}
    fixed = sorted((before & green) - now)
    unproven = sorted((before - now - green) | gone)
    broken = sorted(now - before)
    opaque_failing = any(x.startswith("[") for x in now)
    ok = not unproven and (not now or (bool(before) and not broken and bool(fixed)
                                       and not opaque_failing))
    return Verdict(ok and bool(results), fixed, broken, sorted(now), unproven)


def verdict_notes(judged: Verdict) -> str:
    """Why a round whose checks' exit codes may look fine is not verified ('' if none)."""
    notes = []
    tests = [t for t in judged.unproven if not t.startswith("[")]
    checks = [t[1:-1] for t in judged.unproven if t.startswith("[")]
    if tests:
        notes.append("These tests failed before the change and do not pass now (skipped or "
                     "removed; a test is fixed only when it runs and passes): "
                     + ", ".join(tests[:20]) + (" …" if len(tests) > 20 else ""))
    if checks:
        notes.append("These checks ran before the change and run no more: " + ", ".join(checks))
    return "\n".join(notes)


def _uses_pytest(root: Path, tools: dict[str, Any]) -> bool:
    if "pytest" in tools or _regular(root / "pytest.ini"):
        return True
    if _has_section(root / "setup.cfg", "tool:pytest") or _has_section(root / "tox.ini", "pytest"):
        return True
    return any((name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py")
               for name in _walk_names(root))


def _walk_names(root: Path) -> Iterator[str]:
    seen = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            seen += 1
            if seen > _TEST_FILES_SCANNED:
                return
            yield name


def _has_section(path: Path, section: str) -> bool:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(_text(path))
    except configparser.Error:
        return False
    return parser.has_section(section)


def truncate(output: str, limit: int) -> str:
    """`output` within `limit` chars: its first 40 % and last 50 % (where test runners print
    their summary), and a marker in between saying how much was cut."""
    if len(output) <= limit:
        return output
    widest = len(_cut_marker(len(output)))
    head, tail = limit * 4 // 10, limit * 5 // 10
    if widest > limit - head - tail:  # a tiny limit: the marker's room comes off both ends
        spare = max(0, limit - widest)
        head, tail = spare * 4 // 9, spare - spare * 4 // 9
    text = output[:head] + _cut_marker(len(output) - head - tail) + output[len(output) - tail:]
    return text[:limit]


def _cut_marker(cut: int) -> str:
    return f"\n[… {cut} characters cut …]\n"


def failure_summary(results: list[tuple[Check, int | None, str]],
                    limit: int = 12_000) -> str:
    """What the model reads after a round whose checks did not all pass: one line per check
    that passed, and each failing one's command, exit code and output, cut to share `limit`."""
    failed = [(check, code, output) for check, code, output in results if not passed(check, code)]
    lines = [f"{check.name}: passed" for check, code, _ in results if passed(check, code)]
    if not failed:
        return "\n".join(lines or ["No checks ran."])
    heads = [f"## {check.name} timed out: `{check.command}`" if code is None else
             f"## {check.name} failed (exit code {code}): `{check.command}`"
             for check, code, _ in failed]
    fixed = sum(len(h) + 2 for h in heads) + sum(len(ln) + 1 for ln in lines)
    share = max(200, (limit - fixed) // len(failed))
    blocks = [f"{head}\n{truncate(output.strip(), share) or '(no output)'}"
              for head, (_, _, output) in zip(heads, failed, strict=True)]
    return "\n\n".join([*blocks, *(["\n".join(lines)] if lines else [])])


# Debug mode: when a failure comes back after a fix, the model is patching symptoms; it is
# told so, and shown what kept failing. "Comes back" is measured on the error's words with
# everything that differs between two runs of the same failure normalised away.
DEBUG_THRESHOLD = 0.7
ERROR_KEEP_CHARS = 4000  # of each error kept in the history (it is stored with the job)
MAX_ERRORS = 8

_RUN_NOISE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:z|[+-]\d{2}:?\d{2})?"),
     " "),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"), " "),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), " "),
    (re.compile(r"\b0x[0-9a-f]+\b"), " "),  # memory addresses, ids
    (re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"), " "),  # hashes, object ids
    (re.compile(r"\b(?:tmp|temp|pytest-of-|pytest-)[\w-]*"), " "),  # temp dir names left over
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:ns|µs|us|ms|s|secs?|seconds?|min|minutes?|h)\b"), " "),
    (re.compile(r"\d+"), " "),  # line, column, counts, pids, ports
]
# A run of path characters holding a separator. Tried only where such a run starts: from
# inside a long run it would rescan the rest of it each time (quadratic).
_PATH = re.compile(r"(?<![\w.~+@:/\\-])[\w.~+@:/\\-]*[/\\][\w.~+@:/\\-]*")
_NORMALISED_CHARS = 20_000  # more would only cost time: an error's words are in its ends
_TOKEN = re.compile(r"_*[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*")
# Words every traceback and test report has: left in, they make any two failures look alike.
_BOILERPLATE = frozenset({
    "a", "an", "and", "at", "be", "by", "call", "collected", "error", "errors", "exit", "failed",
    "failures", "file", "for", "from", "in", "is", "items", "last", "line", "most", "not", "of",
    "on", "or", "passed", "platform", "py", "recent", "rootdir", "session", "short", "starts",
    "summary", "test", "tests", "the", "to", "traceback", "warnings", "was", "with", "code",
    "info",
})


def normalise_error(text: str) -> frozenset[str]:
    """The error's words, lowercase, without what changes from run to run of the same failure
    (paths' directories, line and column numbers, addresses, timestamps, durations, temp dirs)."""
    text = _PATH.sub(_last_part, truncate(text, _NORMALISED_CHARS).lower())
    for pattern, replacement in _RUN_NOISE:
        text = pattern.sub(replacement, text)
    return frozenset(t for t in _TOKEN.findall(text) if len(t) > 1 and t not in _BOILERPLATE)


def _last_part(path: re.Match[str]) -> str:
    """A path's last part: the file is the failure's, the directories are the run's."""
    return " " + re.split(r"[/\\]", path.group().rstrip("/\\"))[-1] + " "


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0  # two silent failures look the same
    return len(a & b) / len(a | b)


class ErrorHistory:
    """The errors of a job's rounds, oldest first; stored with the job as a JSON list."""

    def __init__(self, errors: list[str] | None = None) -> None:
        self.errors: list[str] = list(errors or [])[-MAX_ERRORS:]

    def add(self, text: str) -> bool:
        """Record an error; True when it repeats an earlier one (debug mode is due)."""
        text = truncate(text, ERROR_KEEP_CHARS)
        words = normalise_error(text)
        repeats = any(jaccard(words, normalise_error(e)) >= DEBUG_THRESHOLD for e in self.errors)
        self.errors = [*self.errors, text][-MAX_ERRORS:]
        return repeats

    def to_list(self) -> list[str]:
        return list(self.errors)

    @classmethod
    def from_list(cls, errors: list[str]) -> ErrorHistory:
        return cls(errors)

    def __len__(self) -> int:
        return len(self.errors)


DEBUG_SYSTEM_PROMPT = """\
Debug mode: the same failure has come back after an attempted fix. Stop patching symptoms.

1. Compare the failures below: say what stayed the same across attempts and what your last \
change did not affect.
2. Form two or three hypotheses about the root cause, each with the evidence that would \
confirm or refute it.
3. Read the code path end to end, from the failing test or entry point to where the error is \
raised, before changing anything.
4. Add a minimal reproduction (a focused test, or a short script you run) that fails for the \
reason you suspect.
5. Fix the cause, not the message: do not special-case the test's inputs, catch and ignore the \
exception, weaken or delete assertions, or skip tests.
6. Run the reproduction, then the full checks. When a hypothesis proves wrong, say so and test \
the next one."""


def debug_prompt(history: ErrorHistory, per_error: int = 1500) -> str:
    """Debug mode's instructions with the failures so far, each cut to `per_error` chars."""
    failures = "\n\n".join(
        f'<failure attempt="{i}">\n{truncate(error, per_error)}\n</failure>'
        for i, error in enumerate(history.errors, start=1))
    return f"{DEBUG_SYSTEM_PROMPT}\n\nThe failures so far, oldest first:\n\n{failures}"
