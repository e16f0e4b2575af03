"""The coding agent on repositories with dependencies (issue 24): a setup phase installs what
each repository declares into an environment of its own (with the package indexes' network
alone), every later command runs with it, and a second task on the same repository reuses
it. Real installs from the machine's configured indexes; a real worker; the model's fix
scripted as tool calls through the real `anthropic` SDK."""

# ruff: noqa: F811 - the fake fixtures are imported, then requested by name

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tasks.services import egress
from tasks.services.egress_proxy import destination
from tasks.settings import get_settings
from tests.integration.jobdb import tuples, wait_for
from tests.integration.test_api_contract import Caller
from tests.integration.test_coding_agent import alice, model, repos  # noqa: F401
from tests.integration.test_coding_agent import bare_repo as agent_bare_repo
from tests.support import coding_brains as brains
from tests.support.fake_anthropic import FakeAnthropic, anthropic_model, fake_anthropic  # noqa: F401
from tests.support.fake_github import FakeGithub, fake_github  # noqa: F401

TIMEOUT = 240  # a cold install from the registries, then the job


def fixer(path: str, old: str, new: str) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """A model that reads `path`, makes the one edit, and finishes."""
    def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
        step, n = brains.phase(body), brains.turn(body)
        if step == "plan":
            return [brains.text(brains.plan_json("Fix it"))]
        if step == "review":
            return [brains.text("PASS")]
        if step == "explore":
            return [[brains.use("read_file", {"path": path})],
                    [brains.use("finish", {"summary": f"the bug is in {path}"})]][min(n, 1)]
        return [[brains.use("edit_file", {"path": path, "old": old, "new": new})],
                [brains.use("finish", {"summary": "fixed"})]][min(n, 1)]
    return brain


def bare_repo(repos: Path, name: str, files: dict[str, str]) -> Path:
    return agent_bare_repo(repos, name, files, repos.parent / f"work-{name}")


def run(alice: Caller, repo: Path, task: str = "Make the failing test pass") -> dict[str, Any]:
    r = alice.post(f"/api/projects/{alice.project}/code-tasks",
                   {"repo_url": str(repo), "task": task})
    assert r.status_code == 202, r.get_json()
    job = wait_for(r.get_json()["job_id"], "completed", "failed", timeout=TIMEOUT)
    assert job["status"] == "completed", job["last_error"]
    return job


def setup_output(job_id: Any) -> str:
    [(output,)] = tuples("SELECT output FROM job_steps WHERE job_id = %s AND name = 'setup'",
                         (job_id,))
    return str(output.get("output", ""))


WORDY = {
    "pyproject.toml": """\
[project]
name = "wordy"
version = "0.1.0"
dependencies = ["inflection>=0.5"]

[project.optional-dependencies]
test = ["pytest"]

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
""",
    "wordy/__init__.py": "import inflection\n\n\ndef plural(word):\n"
                         "    return inflection.singularize(word)\n",
    "tests/test_wordy.py": "from wordy import plural\n\n\ndef test_plural():\n"
                           "    assert plural('cat') == 'cats'\n",
}


def test_a_python_project_gets_what_its_pyproject_declares_and_a_second_task_reuses_it(
        alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    model.script = fixer("wordy/__init__.py", "singularize", "pluralize")
    bare = bare_repo(repos, "wordy", WORDY)
    first = run(alice, bare)
    result = first["result"]
    # Before issue 24 every round ended in ModuleNotFoundError: nothing was installed
    assert result["tests_passed"] is True, setup_output(first["id"])
    assert result["setup"]["status"] == "installed" and result["setup"]["kinds"] == ["python"]
    assert "inflection" in setup_output(first["id"])
    # A second task on the same repository and dependency files installs nothing
    again = run(alice, bare)
    assert again["result"]["setup"]["status"] == "reused"
    assert again["result"]["tests_passed"] is True
    assert again["result"]["setup"]["seconds"] < 5


def test_test_requirements_are_installed(alice: Caller, repos: Path,
                                         model: FakeAnthropic) -> None:
    model.script = fixer("shout.py", "lower()", "upper()")
    bare = bare_repo(repos, "shout", {
        "test_requirements.txt": "pytest\ninflection\n",
        "shout.py": "def shout(text):\n    return text.lower() + '!'\n",
        "test_shout.py": "import inflection\nfrom shout import shout\n\n\n"
                         "def test_shout():\n"
                         "    assert shout(inflection.titleize('hi')) == 'HI!'\n",
    })
    job = run(alice, bare)
    assert job["result"]["tests_passed"] is True, setup_output(job["id"])
    assert job["result"]["setup"]["status"] == "installed"


def test_a_node_package_gets_its_dependencies(alice: Caller, repos: Path,
                                              model: FakeAnthropic) -> None:
    model.script = fixer("index.js", "a - b", "a + b")
    bare = bare_repo(repos, "padder", {
        "package.json": '{"name": "padder", "version": "1.0.0", "scripts": {"test": '
                        '"node test.js"}, "dependencies": {"left-pad": "1.3.0"}}\n',
        "index.js": "const leftPad = require('left-pad');\n"
                    "module.exports = (a, b) => leftPad(String(a - b), 3, '0');\n",
        "test.js": "const assert = require('assert');\nconst sum = require('./index');\n"
                   "assert.strictEqual(sum(2, 3), '005');\nconsole.log('ok');\n",
    })
    job = run(alice, bare)
    assert job["result"]["tests_passed"] is True, setup_output(job["id"])
    assert job["result"]["setup"]["kinds"] == ["node"]


def test_a_vitest_project_verifies(alice: Caller, repos: Path, model: FakeAnthropic) -> None:
    # vitest loads WebAssembly (which reserves gigabytes it never touches: RLIMIT_AS refused
    # it and the run hung to its timeout) and writes its results into node_modules/.vite
    # (read-only: exit 1 with EROFS once every test had passed)
    model.script = fixer("slug.js", "'.'", "''")
    bare = bare_repo(repos, "slugkit", {
        "package.json": '{"name": "slugkit", "version": "1.0.0", "type": "module", '
                        '"scripts": {"test": "vitest run"}, '
                        '"devDependencies": {"vitest": "1.6.0"}}\n',
        "slug.js": "export const cut = (s, n) => s.slice(0, n) + '.';\n",
        "slug.test.js": "import { expect, test } from 'vitest';\n"
                        "import { cut } from './slug.js';\n\n"
                        "test('cuts plainly', () => {\n"
                        "  expect(cut('harbour', 4)).toBe('harb');\n});\n",
    })
    job = run(alice, bare, "cut adds a dot; the test expects a plain cut")
    result = job["result"]
    assert result["setup"]["status"] == "installed", result["setup"]
    assert result["baseline"] == ["[npm test]"], result
    assert result["tests_passed"] is True and result["verdict"] == "verified", \
        setup_output(job["id"])


def test_the_repositorys_setup_script_runs_first(alice: Caller, repos: Path,
                                                 model: FakeAnthropic) -> None:
    model.script = fixer("calc.py", "a * b", "a + b")
    bare = bare_repo(repos, "scripted", {
        ".switchyard/setup.sh": 'set -e\npython3 -m venv --system-site-packages '
                                '"$SWITCHYARD_ENV/venv"\n"$SWITCHYARD_ENV/venv/bin/pip" '
                                'install --quiet inflection\n',
        "calc.py": "def add(a, b):\n    return a * b\n",
        "test_calc.py": "import inflection\nfrom calc import add\n\n\n"
                        "def test_add():\n    assert add(2, 3) == 5\n",
    })
    job = run(alice, bare)
    assert job["result"]["tests_passed"] is True, setup_output(job["id"])
    assert job["result"]["setup"]["kinds"] == ["script"]


def test_an_environment_too_large_for_its_share_of_the_budget_is_not_kept(
        alice: Caller, repos: Path, model: FakeAnthropic, monkeypatch) -> None:
    # A tenant's setup may write gigabytes (4 x 1 GB files fit the per-file cap), and every
    # kept environment stays on the disk PostgreSQL shares: one may take a quarter of
    # SWITCHYARD_CODE_ENV_MAX_BYTES at most (here 8 MiB: 2 MiB each)
    monkeypatch.setenv("SWITCHYARD_CODE_ENV_MAX_BYTES", str(8 * 1024 * 1024))
    get_settings.cache_clear()
    model.script = fixer("calc.py", "a * b", "a + b")
    bare = bare_repo(repos, "hoarder", {
        ".switchyard/setup.sh": 'head -c 3000000 /dev/zero > "$SWITCHYARD_ENV/blob.bin"\n',
        "calc.py": "def add(a, b):\n    return a * b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    })
    job = run(alice, bare)
    setup = job["result"]["setup"]
    assert setup["status"] == "failed", setup
    assert "2 MiB" in setup["error"] and "SWITCHYARD_CODE_ENV_MAX_BYTES" in setup["error"], setup
    assert not list((get_settings().data_dir / "environments").glob("*/blob.bin"))
    monkeypatch.undo()
    get_settings.cache_clear()


def test_setup_reaches_the_package_indexes_and_nothing_else(alice: Caller, repos: Path,
                                                            model: FakeAnthropic) -> None:
    # At the proxy: a host outside SWITCHYARD_CODE_SETUP_HOSTS is refused whatever it is
    for url in ("https://example.org/", "http://127.0.0.1:5432/", "https://169.254.169.254/"):
        with pytest.raises(egress.EgressRefused,
                           match=r"SWITCHYARD_CODE_SETUP_HOSTS|not one a sandbox may reach"):
            destination("setup", url)
    # And from a setup command in the sandbox: the request is answered 403, saying why
    model.script = fixer("calc.py", "a * b", "a + b")
    bare = bare_repo(repos, "nosy", {
        ".switchyard/setup.sh": "python3 - <<'EOF'\nimport urllib.request as u, urllib.error"
                                " as e\ntry:\n    u.urlopen('https://example.org/', timeout=20)"
                                "\nexcept e.URLError as x:\n    print('refused:', x)\nEOF\n",
        "calc.py": "def add(a, b):\n    return a * b\n",
        "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    })
    job = run(alice, bare)
    assert "refused: <urlopen error Tunnel connection failed: 403" in setup_output(job["id"])


def _set_up_in_child(root: str, key: str, commands: list[tuple[str, str]]) -> None:
    """A worker process that runs setup (killed by the test part way)."""
    from tasks.coding import environments as envs
    from tasks.coding.fence import RunPolicy
    from tasks.coding.setup_plan import SetupPlan

    envs.set_up(Path(root), SetupPlan(("python",), (), tuple(commands)), key,
                RunPolicy.from_settings(), envs.installer())


def test_a_worker_killed_during_setup_leaves_an_install_the_next_attempt_finishes() -> None:
    import multiprocessing
    import os
    import shutil
    import signal
    import tempfile

    from tasks.coding import environments as envs
    from tasks.coding.fence import RunPolicy
    from tasks.coding.sandbox import prepare_for_sandbox
    from tasks.coding.setup_plan import VENV, SetupPlan
    from tests.conftest import wait_until

    parent = Path(tempfile.mkdtemp(prefix="switchyard-test-setup-"))
    parent.chmod(0o711)  # passable by the sandbox user, as workspaces are
    root = parent / "repo"
    root.mkdir()
    (root / "README.md").write_text("x\n")
    prepare_for_sandbox(root)
    key = f"killed-{parent.name}"
    uv = "/run/switchyard-tools/uv pip install --python " + VENV + "/bin/python"
    make = (f"/run/switchyard-tools/uv venv --quiet --system-site-packages "
            f"--python /usr/bin/python3 {VENV}")
    install = ("install", f"{uv} inflection")
    child = multiprocessing.get_context("spawn").Process(
        target=_set_up_in_child, args=(str(root), key, [("venv", make), install,
                                                        ("stall", "sleep 600")]))
    child.start()
    building = envs.root_dir() / f"{key}.building"
    wait_until(lambda: list(building.glob("venv/lib/python3*/site-packages/inflection*"))
               or not child.is_alive(), timeout=120, what="the first install to land")
    assert child.is_alive(), "setup ended before the test could kill it"
    os.kill(child.pid, signal.SIGKILL)  # the worker dies in the middle of its setup
    child.join(10)
    assert not envs.is_ready(key)
    # When the job resumes, setup runs again: what was installed is not installed again
    again = envs.set_up(root, SetupPlan(("python",), (), (
        ("venv", f"[ -x {VENV}/bin/python ] || {make}"), install)), key,
        RunPolicy.from_settings(), envs.installer())
    assert again["status"] == "installed", again
    assert "+ inflection" not in again["output"], again["output"]
    assert envs.is_ready(key) and not building.exists()
    shutil.rmtree(parent)
