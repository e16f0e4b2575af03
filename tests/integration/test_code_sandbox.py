"""The coding agent's bubblewrap fence: what separates one tenant's command from another's,
and the fence as a worker that is not root.

The older fence tests (time, output, memory, network, .git) are in test_coding_tools.py and
hold for this fence too; these are the ones issue 21 adds. Needs no database.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.coding import sandbox
from tasks.coding.sandbox import RunPolicy, SandboxUnavailable, prepare_for_sandbox, run_command
from tasks.settings import get_settings

POLICY = RunPolicy(timeout_seconds=30, memory_mb=1024, output_chars=20000)
ROOT = Path(__file__).resolve().parents[2]
TEST_USER = "switchyard-test"
HAS_BWRAP = shutil.which("bwrap") is not None
RUNUSER = shutil.which("runuser")
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap is not installed")


def _workspace(parent: Path, name: str) -> Path:
    root = parent / name
    root.mkdir()
    (root / "README.md").write_text(f"{name}\n")
    prepare_for_sandbox(root)
    return root


@pytest.fixture
def parent() -> Iterator[Path]:
    """Where checkouts live, laid out as workspace_for lays it out: passable, not listable."""
    where = Path(tempfile.mkdtemp(prefix="switchyard-test-sandbox-"))
    where.chmod(0o711)
    yield where
    shutil.rmtree(where)


# --- tenants ----------------------------------------------------------------------------------


PLANT_AND_LOOK = (
    # Plant what would run in another tenant's Python or git, wait for the other command to
    # plant its own, then look for it: both commands are alive at the same time.
    "site=$HOME/.local/lib/python3.11/site-packages && mkdir -p $site && "
    "echo 'import os; os.system(\"echo pwned-{me}\")' > $site/evil-{me}.pth && "
    "printf '[alias]\\n\\tst = !echo pwned-{me}\\n' >> $HOME/.gitconfig && "
    "echo {me} > /tmp/planted-{me} && echo {me} > $HOME/planted-{me} && sleep 3 && "
    "echo LISTING $(ls -A /tmp $HOME) && "
    "cat /tmp/planted-{other} $HOME/planted-{other}; "
    "echo PYTHON; python3 -c 'print(\"python ran\")'; echo GIT; git st"
)


@needs_bwrap
def test_two_concurrent_commands_of_different_projects_cannot_see_each_others_tmp_or_home(
        parent: Path) -> None:
    # Given two projects' checkouts and a command in each, running at the same moment
    roots = {"alpha": _workspace(parent, "alpha"), "bravo": _workspace(parent, "bravo")}
    results: dict[str, sandbox.CommandResult] = {}

    def run(me: str, other: str) -> None:
        results[me] = run_command(roots[me], PLANT_AND_LOOK.format(me=me, other=other), POLICY)

    threads = [threading.Thread(target=run, args=pair)
               for pair in (("alpha", "bravo"), ("bravo", "alpha"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for me, other in (("alpha", "bravo"), ("bravo", "alpha")):
        out = results[me].output
        listing = next(line for line in out.splitlines() if line.startswith("LISTING"))
        python = out.split("PYTHON\n")[1].split("GIT\n")[0]
        # Then each saw its own /tmp and HOME (the control) and nothing of the other's
        assert f"planted-{me}" in listing and f"planted-{other}" not in listing, out
        assert out.count("No such file or directory") == 2, out
        # and the other's .pth and .gitconfig never ran; its own .pth not even for itself
        assert f"pwned-{other}" not in out, out
        assert python == "python ran\n", out
        assert out.endswith(f"pwned-{me}\n"), out  # its own git alias: HOME is its own


@needs_bwrap
def test_a_command_sees_the_system_read_only_and_no_other_checkout(parent: Path) -> None:
    mine, theirs = _workspace(parent, "mine"), _workspace(parent, "theirs")
    (theirs / "secret.txt").write_text("the other tenant's code\n")
    result = run_command(mine, f"cat {theirs}/secret.txt; ls {parent}; ls -A /; "
                         "touch /usr/evil /etc/evil; echo ok > mine.txt; cat mine.txt", POLICY)
    assert "the other tenant's code" not in result.output
    assert "theirs" not in result.output.split()  # not listed (only named in errors)
    top = set(result.output.split())
    assert not top & {"root", "srv", "work", "boot", "mnt", "run"}, result.output
    assert result.output.count("Read-only file system") == 2, result.output
    assert run_command(mine, "ls -A /var", POLICY).output == "tmp\n"  # its own /tmp
    assert (mine / "mine.txt").read_text() == "ok\n"


@needs_bwrap
def test_the_checkouts_git_is_read_only_inside_whoever_the_worker_is(parent: Path) -> None:
    root = _workspace(parent, "repo")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    prepare_for_sandbox(root)
    result = run_command(root, "touch .git/planted; echo x > .git/config; echo fine > f", POLICY)
    assert result.output.count("Read-only file system") == 2 or \
        result.output.count("Permission denied") == 2, result.output
    assert not (root / ".git" / "planted").exists() and (root / "f").read_text() == "fine\n"


def test_the_environment_keeps_user_site_packages_out() -> None:
    assert sandbox.sandbox_env(Path("/home/sandbox"))["PYTHONNOUSERSITE"] == "1"


# --- no bubblewrap ----------------------------------------------------------------------------


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: None if name == "bwrap" else real_which(name))


@pytest.fixture
def same_user(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SWITCHYARD_CODE_SANDBOX_SAME_USER", "1")
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()


def test_without_bubblewrap_commands_are_refused_and_the_problem_named(
        parent: Path, no_bwrap: None) -> None:
    root = _workspace(parent, "job")
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        run_command(root, "true", POLICY)
    with pytest.raises(SandboxUnavailable):  # network or not: never unfenced
        run_command(root, "true", RunPolicy(5, 256, 1000, network=True))
    assert "bubblewrap is not installed" in (sandbox.problem() or "")


def test_the_same_user_opt_out_falls_back_to_the_unshare_fence(
        parent: Path, no_bwrap: None, same_user: None) -> None:
    root = _workspace(parent, "job")
    result = run_command(root, "echo $((6 * 7)); python3 -c 'import socket; "
                         "socket.create_connection((\"1.1.1.1\", 53), timeout=2)'", POLICY)
    assert result.output.startswith("42\n") and "Network is unreachable" in result.output
    assert sandbox.problem() is None


def test_a_bubblewrap_that_cannot_make_namespaces_is_named_with_the_docker_hint(
        parent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # bwrap's own words when seccomp (Docker's default profile) refuses clone(CLONE_NEWUSER);
    # in `parent`, which the sandbox user a root worker drops to can reach
    fake = parent / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely "
                    "because the kernel does not allow non-privileged user namespaces.' >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: str(fake) if name == "bwrap"
                        else real_which(name, *a, **k))
    sandbox.forget_probes()
    why = sandbox.problem() or ""
    assert "user namespace" in why and "seccomp" in why and "No permissions" in why, why
    with pytest.raises(SandboxUnavailable, match="user namespace"):
        run_command(_workspace(parent, "job"), "true", POLICY)
    sandbox.forget_probes()


# --- a worker that is not root ------------------------------------------------------------------


def _test_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", TEST_USER], check=True, capture_output=True)
        return pwd.getpwnam(TEST_USER)


def _import_path() -> str:
    """Where /usr/bin/python3, run as another user, finds Switchyard and its dependencies:
    this checkout and the venv's site-packages (the venv's own python may live under /root,
    which other users cannot read)."""
    site = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    return os.pathsep.join([str(ROOT), *site])


AS_WORKER = """
import json, subprocess, sys
from pathlib import Path
from tasks.coding import sandbox, verify
from tasks.coding.demo import ensure_demo_repo

data = Path(sys.argv[1])
bare = ensure_demo_repo(data / "repos")
work = data / "workspaces" / "job"
subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True)
sandbox.prepare_for_sandbox(work)
policy = sandbox.RunPolicy(timeout_seconds=60, memory_mb=1024, output_chars=20000)
checks = [c.command for c in verify.detect_commands(work)]
ran = sandbox.run_command(work, checks[0], policy)
probe = sandbox.run_command(work, "id -u; touch .git/planted; env; ls -A /; echo $HOME",
                            policy)
print(json.dumps({"problem": sandbox.problem(), "checks": checks, "exit_code": ran.exit_code,
                  "output": ran.output, "probe": probe.output}))
"""


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or RUNUSER is None,
                    reason="making an ordinary user to run the worker as needs root")
def test_the_sandbox_as_a_non_root_worker_runs_the_demo_repositorys_tests() -> None:
    user = _test_user()
    data = Path(tempfile.mkdtemp(prefix="switchyard-test-nonroot-"))
    try:
        data.chmod(0o755)
        os.chown(data, user.pw_uid, user.pw_gid)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": user.pw_dir,
               "PYTHONPATH": _import_path(), "SWITCHYARD_DATA_DIR": str(data / "switchyard"),
               "LANG": "C.UTF-8", "SECRET_OF_THE_WORKER": "leaked-worker-secret"}
        assert RUNUSER is not None
        done = subprocess.run([RUNUSER, "-u", TEST_USER, "--", "/usr/bin/python3", "-c",
                               AS_WORKER, str(data)], env=env, capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        out = json.loads(done.stdout.splitlines()[-1])
        assert out["problem"] is None
        assert out["checks"][0].startswith("python3 -m pytest")
        # The demo's calculator has one failing test (add subtracts): the agent's to fix.
        assert out["exit_code"] == 1, out["output"]
        assert "1 failed, 1 passed" in out["output"], out["output"]
        probe = out["probe"].splitlines()
        assert probe[0] == str(user.pw_uid)  # the worker's own user, in its own namespaces
        assert "Read-only file system" in out["probe"]
        assert "home" in probe and "switchyard" not in out["probe"].replace(str(data), "")
        assert probe[-1] != user.pw_dir  # a private HOME, not the worker's
        assert "leaked-worker-secret" not in out["probe"]  # the worker's env stays its own
        assert "PYTHONNOUSERSITE=1" in probe
    finally:
        shutil.rmtree(data)
