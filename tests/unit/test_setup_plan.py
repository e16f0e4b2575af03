"""What a repository declares, read off its files, and the verdict of its checks (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.coding import verify
from tasks.coding.setup_plan import plan_setup


def repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    return tmp_path


PYPROJECT = ('[project]\nname = "x"\nversion = "1"\n[project.optional-dependencies]\n'
             'test = ["pytest"]\ndocs = ["sphinx"]\n')


@pytest.mark.parametrize(("files", "kinds", "needles"), [
    ({"pyproject.toml": PYPROJECT}, ("python",), ["-e '/workspace[test]'"]),
    ({"test_requirements.txt": "pytest\n", "requirements/base.txt": "six\n",
      "requirements-dev.txt": "x\n"}, ("python",),
     ["-r /workspace/requirements-dev.txt -r /workspace/test_requirements.txt "
      "-r /workspace/requirements/base.txt"]),
    ({"setup.py": "from setuptools import setup\nsetup()\n"}, ("python",), ["-e /workspace"]),
    ({"package.json": '{"dependencies": {"a": "1"}}', "package-lock.json": "{}"}, ("node",),
     ["npm ci --no-audit --no-fund"]),
    ({"package.json": '{"devDependencies": {"a": "1"}}'}, ("node",), ["npm install"]),
    ({"package.json": '{"name": "no-deps"}'}, (), []),
    ({".switchyard/setup.sh": "echo hi\n"}, ("script",), ["bash /workspace/.switchyard/setup.sh"]),
])
def test_what_is_declared_is_what_is_installed(tmp_path, files, kinds, needles) -> None:
    plan = plan_setup(repo(tmp_path, files), installer="uv", toolchains=frozenset())
    assert plan.kinds == kinds
    text = "\n".join(c for _, c in plan.commands)
    assert all(n in text for n in needles), text


def test_a_toolchain_that_is_missing_is_said_and_a_link_is_never_read(tmp_path) -> None:
    root = repo(tmp_path, {"go.mod": "module x\n"})
    (root / "requirements.txt").symlink_to("/etc/passwd")
    plan = plan_setup(root, installer="pip", toolchains=frozenset())
    assert plan.notes == ("not set up: no go toolchain on this worker (go.mod)",)
    assert plan.empty and plan.kinds == ()
    with_go = plan_setup(root, installer="pip", toolchains=frozenset({"go"}))
    assert with_go.kinds == ("go",) and with_go.variables["GOMODCACHE"].endswith("/go/mod")


def run(name: str, passed: bool, failed: list[str] | None = None,
        ok: list[str] | None = None) -> dict:
    return {"name": name, "passed": passed,
            "tests": None if failed is None else {"failed": failed, "passed": ok or []}}


def test_the_verdict_against_the_baseline() -> None:
    before = [run("pytest", False, ["t::legacy", "t::target"])]
    fixed = verify.verdict(before, [run("pytest", False, ["t::legacy"], ["t::target"])])
    assert (fixed.passed, fixed.fixed, fixed.broken) == (True, ["t::target"], [])
    broke = verify.verdict(before, [run("pytest", False, ["t::legacy", "t::other"],
                                        ["t::target"])])
    assert (broke.passed, broke.fixed, broke.broken) == (False, ["t::target"], ["t::other"])
    same = verify.verdict(before, [run("pytest", False, ["t::legacy", "t::target"])])
    assert not same.passed
    assert verify.verdict(None, [run("pytest", True, [], ["a"])]).passed
    assert not verify.verdict(None, []).passed  # nothing ran: nothing verified
    # A check without a report counts as one failure of its own
    assert verify.verdict([run("npm test", False)], [run("npm test", False)]).failing == [
        "[npm test]"]


def test_junit_names_the_tests() -> None:
    xml = ('<testsuites><testsuite><testcase classname="t" name="a"/><testcase classname="t" '
           'name="b"><failure/></testcase><testcase classname="t" name="c"><skipped/>'
           '</testcase><testcase classname="t" name="d"><error/></testcase></testsuite>'
           '</testsuites>')
    assert verify.junit_tests(xml) == (["t::a"], ["t::b", "t::d"])
    assert verify.junit_tests("not xml") is None
