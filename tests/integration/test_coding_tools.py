"""The coding agent's sandbox and process-backed tools, with real processes.

Each test names a way a command could get out of hand (run forever, leave children behind,
flood the output, eat memory, fork, reach the network or the worker's secrets, rewrite
.git) and shows the fence holding. Needs no database.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.coding import file_tools, sandbox
from tasks.coding.sandbox import (
    WORKER_GIT_CONFIG,
    RunPolicy,
    SandboxUnavailable,
    prepare_for_sandbox,
    run_command,
)
from tasks.coding.tools import run_tool
from tasks.coding.workspace import Workspace, nested_repositories
from tests.conftest import wait_until

POLICY = RunPolicy(timeout_seconds=20, memory_mb=1024, output_chars=5000)
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT,
                                reason="the worker drops to a sandbox uid only as root")


@pytest.fixture
def ws() -> Iterator[Workspace]:
    """A checkout laid out as workspace_for lays it out: the parent passable, not listable."""
    parent = Path(tempfile.mkdtemp(prefix="switchyard-test-ws-"))
    parent.chmod(0o711)
    root = parent / "job"
    root.mkdir()
    (root / "README.md").write_text("hello\n")
    prepare_for_sandbox(root)
    yield Workspace(root)
    shutil.rmtree(parent)


def token() -> str:
    return str(random.randint(10**8, 10**9 - 1))


def alive(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (zombies have none)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def policy(**changes: object) -> RunPolicy:
    return RunPolicy(**{**POLICY.__dict__, **changes})  # type: ignore[arg-type]


# --- time -----------------------------------------------------------------------------------


def test_a_command_past_its_timeout_dies_with_everything_it_started(ws: Workspace) -> None:
    t = token()
    # A background child, one that escaped into a session of its own, a shell deaf to TERM.
    command = (f"sleep 1000.{t} & setsid sleep 1001.{t} & trap '' TERM INT; "
               f"echo started; sleep 1002.{t}")
    result = run_command(ws.root, command, policy(timeout_seconds=2))
    assert result.timed_out and result.exit_code is None
    assert 1.9 < result.seconds < 8
    assert "started" in result.output
    wait_until(lambda: not alive(t), timeout=5, what=f"processes of {t} to be gone")


@pytest.fixture
def no_unshare(monkeypatch, settings_env) -> None:
    """A worker without bubblewrap or util-linux's unshare whose operator accepted the weaker
    fence."""
    real_which = shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name, *a, **k:
                        None if name in ("unshare", "bwrap") else real_which(name))
    settings_env(SWITCHYARD_CODE_SANDBOX_SAME_USER="1")


def test_a_command_that_closes_its_output_still_meets_the_timeout(ws: Workspace) -> None:
    t = token()
    result = run_command(ws.root, f"exec >&- 2>&-; sleep 1000.{t}", policy(timeout_seconds=2))
    assert result.timed_out and result.exit_code is None and result.seconds < 8
    wait_until(lambda: not alive(t), timeout=5, what="the sleeper to be gone")


def test_a_background_child_holding_the_pipe_does_not_hold_the_command(ws: Workspace) -> None:
    t = token()
    result = run_command(ws.root, f"sleep 1000.{t} & setsid sleep 1001.{t} & echo done",
                         policy(timeout_seconds=30))
    assert not result.timed_out and result.exit_code == 0 and result.seconds < 5
    assert result.output == "done\n"
    wait_until(lambda: not alive(t), timeout=5, what=f"processes of {t} to be gone")


def test_the_run_tool_cannot_ask_for_more_time_than_the_policy(ws: Workspace) -> None:
    t = token()
    out = run_tool(ws, "run", {"command": f"sleep 30.{t}", "timeout_seconds": 1000},
                   policy(timeout_seconds=1))
    assert out.is_error and out.changed
    assert "timed out after 1s" in out.content
    wait_until(lambda: not alive(t), timeout=5, what="the sleeper to be gone")


def test_exit_codes_and_signals_come_back_as_the_command_meant_them(ws: Workspace) -> None:
    assert run_command(ws.root, "exit 3", POLICY).exit_code == 3
    # The command is not PID 1 of its namespace (which ignores signals it does not handle).
    assert run_command(ws.root, "kill -TERM $$; sleep 5", POLICY).exit_code == 143
    out = run_tool(ws, "run", {"command": "echo out; echo err >&2; false"}, POLICY)
    assert not out.is_error  # a failing command is an answer, not a tool failure
    assert out.content.startswith("out\nerr\n[exit code 1, ")


# --- output ---------------------------------------------------------------------------------


def test_a_flood_of_output_is_capped_and_the_command_killed(ws: Workspace) -> None:
    result = run_command(ws.root, "yes", policy(output_chars=1000, timeout_seconds=30))
    assert not result.timed_out and result.exit_code is None and result.seconds < 10
    assert result.truncated
    assert len(result.output) < 1000 + 200
    assert "characters cut ...]" in result.output
    assert result.output.endswith("[the command was killed: it wrote more than "
                                  "100000 characters]")


def test_long_output_keeps_its_head_and_tail_with_the_cut_counted(ws: Workspace) -> None:
    full = "".join(f"{n}\n" for n in range(1, 20001))
    result = run_command(ws.root, "seq 1 20000", policy(output_chars=2000))
    assert result.exit_code == 0 and result.truncated  # 109 k: long, but not a flood
    assert result.output == (f"{full[:800]}\n[... {len(full) - 1800} characters cut ...]\n"
                             f"{full[-1000:]}")


# --- memory and processes ---------------------------------------------------------------------


def test_memory_is_capped(ws: Workspace) -> None:
    grab = "python3 -c \"b = bytearray({mb} * 1024 * 1024); print('allocated')\""
    small = run_command(ws.root, grab.format(mb=32), policy(memory_mb=256))
    assert small.exit_code == 0 and "allocated" in small.output  # the control
    big = run_command(ws.root, grab.format(mb=512), policy(memory_mb=256))
    assert big.exit_code != 0 and "MemoryError" in big.output and "allocated" not in big.output


def test_webassembly_runs_under_the_memory_cap(ws: Workspace) -> None:
    # V8 reserves gigabytes of address space for a wasm memory and touches a page of it:
    # capped by address space (RLIMIT_AS) node could not make one (vitest hung, then died)
    if shutil.which("node") is None:
        pytest.fail("node is not installed (apt-get install nodejs)")
    wasm = ("node -e \"const m = new WebAssembly.Memory({initial: 1}); "
            "console.log('wasm', m.buffer.byteLength)\"")
    ran = run_command(ws.root, wasm, policy(memory_mb=256))
    assert ran.exit_code == 0 and "wasm 65536" in ran.output, ran.output


@needs_root
def test_a_fork_bomb_meets_the_process_limit(ws: Workspace) -> None:
    forker = ("import os, time\n"
              "n = 0\n"
              "try:\n"
              "    while n < 500:\n"
              "        if os.fork() == 0:\n"
              "            time.sleep(60)\n"
              "            os._exit(0)\n"
              "        n += 1\n"
              "except OSError as exc:\n"
              "    print('limited after', n, exc.strerror)\n")
    (ws.root / "forker.py").write_text(forker)
    # RLIMIT_NPROC counts every task of the sandbox's uid on the machine: the threads of a
    # command that just ended (node's) may still be going, and the warm function sandboxes
    # are that uid's too. Counted first, so the cap leaves this command 16 of its own.
    others = _settled_tasks_of(sandbox.SANDBOX_UID)
    result = run_command(ws.root, "python3 forker.py", policy(max_processes=others + 16))
    assert "limited after" in result.output and "Resource temporarily unavailable" \
        in result.output, result.output
    assert int(result.output.split()[2]) < 16


def _settled_tasks_of(uid: int, seconds: float = 10.0) -> int:
    """How many tasks (threads) `uid` has, once the count stops falling (or after seconds)."""
    def count() -> int:
        n = 0
        for status in Path("/proc").glob("[0-9]*/task/[0-9]*/status"):
            try:
                uids = next(line for line in status.read_text().splitlines()
                            if line.startswith("Uid:")).split()
            except (OSError, StopIteration):
                continue
            n += int(uids[1]) == uid  # the real uid: what RLIMIT_NPROC counts
        return n
    deadline, last = time.monotonic() + seconds, count()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = count()
        if now >= last:
            return now
        last = now
    return last


# --- the network ----------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on loopback, where PostgreSQL and Redis would listen; what it received."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], received
    server.close()


CONNECT = ("python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), "
           "timeout=3); s.sendall(b'hello'); print('connected')\"")


def test_no_network_by_default_not_even_loopback(ws: Workspace, listener) -> None:
    port, received = listener
    result = run_command(ws.root, CONNECT.format(port=port), POLICY)
    assert result.exit_code != 0 and "connected" not in result.output
    # A network namespace of its own: its loopback is up (a repository's tests may serve on
    # it) but nothing of the machine's listens there.
    assert "Connection refused" in result.output, result.output
    assert received == []


# no_proxy names loopback (a test suite's own servers stay direct): unset here, so the
# request asks the proxy, which must refuse it.
FETCH = ("env -u no_proxy -u NO_PROXY python3 -c \"import urllib.request as u, urllib.error as e\n"
         "try: print('status', u.urlopen('{url}', timeout=20).status)\n"
         "except e.HTTPError as x: print('status', x.code, x.read().decode())\"")


def test_network_when_the_project_allows_it_goes_through_the_egress_guard(
        ws: Workspace, listener, settings_env) -> None:
    # Issue 23: "network mode gives the code sandbox the host network with no egress guard".
    port, received = listener
    online = policy(network=True, timeout_seconds=60)
    settings_env(SWITCHYARD_EGRESS_ALLOW="")  # the shipped default: nothing internal
    # The machine's loopback (PostgreSQL, Redis, the worker's own services) is not there
    direct = run_command(ws.root, CONNECT.format(port=port), online)
    assert direct.exit_code != 0 and "connected" not in direct.output, direct.output
    # And asked of the proxy, it is refused by the egress guard, saying so
    proxied = run_command(ws.root, FETCH.format(url=f"http://127.0.0.1:{port}/"), online)
    assert "status 403 egress refused" in proxied.output, proxied.output
    assert received == []
    # While a public registry answers through it (TLS, through CONNECT)
    registry = run_command(ws.root, FETCH.format(url="https://pypi.org/simple/six/"), online)
    assert "status 200" in registry.output, registry.output
    # And a host the operator allows is still reached on the web's ports only: its other
    # services (a database, a cache) stay closed to sandboxes
    settings_env(SWITCHYARD_EGRESS_ALLOW="127.0.0.1")
    other = run_command(ws.root, FETCH.format(url=f"http://127.0.0.1:{port}/x"), online)
    assert f"status 403 egress refused: port {port} is not one" in other.output, other.output
    assert received == []


def test_without_unshare_a_command_that_must_not_have_network_is_refused(
        ws: Workspace, no_unshare: None) -> None:
    with pytest.raises(SandboxUnavailable, match="unshare"):
        run_command(ws.root, "true", POLICY)
    with pytest.raises(SandboxUnavailable):  # not an error result the model could shrug off
        run_tool(ws, "run", {"command": "true"}, POLICY)
    # Network allowed: the egress guard needs bubblewrap's fence, so that is refused too
    with pytest.raises(SandboxUnavailable, match="egress guard"):
        run_command(ws.root, "true", policy(network=True))


# --- the worker's secrets ------------------------------------------------------------------------


def test_the_environment_is_scrubbed(ws: Workspace, monkeypatch) -> None:
    leaks = {"DATABASE_URL": "postgresql://leaked-db-url", "BROKER_URL": "redis://leaked-broker",
             "ANTHROPIC_API_KEY": "sk-ant-leaked-key", "SWITCHYARD_SECRET_KEY": "leaked" * 8,
             "AWS_SECRET_ACCESS_KEY": "leaked-aws"}
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    result = run_command(ws.root, "env", POLICY)
    assert result.exit_code == 0
    for name, value in leaks.items():
        assert name not in result.output and value not in result.output
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert env["CI"] == "true" and env["LANG"] == "C.UTF-8" and env["TERM"] == "dumb"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    home = Path(env["HOME"])
    assert home != ws.root and not home.exists()  # a throwaway HOME, gone afterwards


@needs_root
def test_the_command_runs_as_a_user_who_cannot_read_the_servers_files(ws: Workspace) -> None:
    holder = Path(tempfile.mkdtemp(prefix="switchyard-test-secret-"))
    try:
        holder.chmod(0o755)  # reachable: only the file's own mode keeps it private
        secret = holder / "secret_key"
        secret.write_text("the-servers-secret-key\n")
        secret.chmod(0o600)
        # Outside the checkout the machine's files are not even there; inside it, a file
        # of root's stays root's.
        inside = ws.root / "secret_key"
        inside.write_text("the-servers-secret-key\n")
        inside.chmod(0o600)
        result = run_command(ws.root, f"id -u; cat {secret}; echo x > {holder}/planted; "
                             "cat secret_key", POLICY)
        assert result.output.splitlines()[0] == str(sandbox.SANDBOX_UID)
        assert "secret_key: Permission denied" in result.output, result.output
        assert "the-servers-secret-key" not in result.output
        assert not (holder / "planted").exists()
    finally:
        shutil.rmtree(holder)


# --- the checkout and its .git ------------------------------------------------------------------


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as the worker runs it: root, no global config (so no safe.directory)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(root / ".no-home"), "GIT_AUTHOR_NAME": "w",
           "GIT_AUTHOR_EMAIL": "w@x", "GIT_COMMITTER_NAME": "w", "GIT_COMMITTER_EMAIL": "w@x",
           "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True,
                          check=False)


@needs_root
def test_commands_work_the_tree_but_cannot_touch_git_internals(ws: Workspace) -> None:
    root = ws.root
    assert git(root, "init", "-q").returncode == 0
    assert git(root, "add", "README.md").returncode == 0
    assert git(root, "commit", "-qm", "base").returncode == 0
    prepare_for_sandbox(root)
    config = (root / ".git" / "config").read_text()

    work = run_command(root, "echo more >> README.md && mkdir -p a/b && touch a/b/c new && "
                       "rm new && git status --short && git log --oneline | wc -l", POLICY)
    assert work.exit_code == 0, work.output
    assert " M README.md" in work.output and "?? a/" in work.output

    for attack in ["echo evil > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
                   "git config core.fsmonitor 'touch /tmp/pwned'", "mv .git .git-old",
                   "rm -rf .git", "ln -sf /tmp .git/hooks"]:
        result = run_command(root, attack, POLICY)
        assert result.exit_code != 0, (attack, result.output)
    assert (root / ".git" / "config").read_text() == config
    assert not (root / ".git" / "hooks" / "pre-commit").exists()

    # The worker's own git needs no safe.directory: the root and .git stay root's.
    status = git(root, "status", "--short")
    assert status.returncode == 0, status.stderr
    assert " M README.md" in status.stdout


@needs_root
def test_a_planted_repository_cannot_run_code_through_the_workers_git(ws: Workspace) -> None:
    root = ws.root
    git(root, "init", "-q")
    git(root, "add", "README.md")
    assert git(root, "commit", "-qm", "base").returncode == 0
    prepare_for_sandbox(root)
    witness = Path(tempfile.mkdtemp(prefix="switchyard-test-witness-"))  # root's only: 0700
    marker = witness / "ran-as-root"
    try:
        plant = run_command(root, "echo work >> README.md && mkdir evil && cd evil && "
                            "git init -q && echo x > f && "
                            "git add f && git -c user.name=a -c user.email=b commit -qm e && "
                            f"git config core.fsmonitor 'touch {marker}; false'", POLICY)
        assert plant.exit_code == 0, plant.output
        assert nested_repositories(root) == ["evil"]
        for args in [("add", "-A"), ("status", "--short"), ("diff", "--cached", "--stat"),
                     ("commit", "-qm", "work"), ("diff", "HEAD~1", "--stat")]:
            done = git(root, *WORKER_GIT_CONFIG, *args)
            assert done.returncode == 0, (args, done.stderr)
            assert not marker.exists(), args
        git(root, "status", "--short")  # the control: without the config git runs it
        assert marker.exists()
    finally:
        shutil.rmtree(witness)


def test_files_the_tools_write_stay_workable_for_commands(ws: Workspace) -> None:
    written = run_tool(ws, "write_file", {"path": "pkg/new/mod.txt", "content": "one\n"}, POLICY)
    assert not written.is_error
    appended = run_tool(ws, "run", {"command": "echo two >> pkg/new/mod.txt && "
                                    "touch pkg/new/other"}, POLICY)
    assert "[exit code 0" in appended.content, appended.content
    assert (ws.root / "pkg" / "new" / "mod.txt").read_text() == "one\ntwo\n"


# --- search and lint: the tools that start a program ----------------------------------------------


@pytest.fixture
def tree(ws: Workspace) -> Workspace:
    (ws.root / "src").mkdir()
    (ws.root / "src" / "a.py").write_text("import os\n\ndef needle():\n    return '-flag'\n")
    (ws.root / ".github").mkdir()
    (ws.root / ".github" / "ci.yml").write_text("run: needle\n")
    (ws.root / ".git").mkdir()
    (ws.root / ".git" / "config").write_text("needle = in git internals\n")
    return ws


def test_search_answers_path_line_text(tree: Workspace) -> None:
    out = run_tool(tree, "search", {"pattern": "needle"}, POLICY)
    assert not out.is_error
    assert sorted(out.content.splitlines()) == [".github/ci.yml:1:run: needle",
                                                "src/a.py:3:def needle():"]
    one = run_tool(tree, "search", {"pattern": "needle", "path": "src/a.py"}, POLICY)
    assert one.content == "src/a.py:3:def needle():"


def test_search_takes_a_pattern_starting_with_a_dash_as_a_pattern(tree: Workspace) -> None:
    out = run_tool(tree, "search", {"pattern": "-flag"}, POLICY)
    assert out.content == "src/a.py:4:    return '-flag'"
    files = run_tool(tree, "search", {"pattern": "--files"}, POLICY)
    assert files.content == "no matches for '--files' in ."


def test_search_caps_its_matches(tree: Workspace) -> None:
    (tree.root / "many.txt").write_text("hit\n" * 1000)
    out = run_tool(tree, "search", {"pattern": "hit", "path": "many.txt"}, POLICY)
    lines = out.content.splitlines()
    assert len(lines) == file_tools.SEARCH_MAX_MATCHES + 1
    assert lines[0] == "many.txt:1:hit"
    assert lines[-1].startswith(f"[only the first {file_tools.SEARCH_MAX_MATCHES} matches")


def test_search_errors_are_error_results(tree: Workspace, monkeypatch) -> None:
    bad = run_tool(tree, "search", {"pattern": "("}, POLICY)
    assert bad.is_error and "regex parse error" in bad.content
    out = run_tool(tree, "search", {"pattern": "root", "path": "../"}, POLICY)
    assert out.is_error and "escapes the workspace" in out.content
    monkeypatch.setattr(file_tools.shutil, "which", lambda name: None)
    missing = run_tool(tree, "search", {"pattern": "needle"}, POLICY)
    assert missing.is_error and "ripgrep (rg) is not installed" in missing.content


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_lint_on_edit_reports_a_javascript_syntax_error_with_its_line(ws: Workspace) -> None:
    out = run_tool(ws, "write_file", {"path": "web/app.mjs",
                                      "content": "export const a = 1;\nlet = ;\n"}, POLICY)
    assert not out.is_error and out.changed
    assert "syntax error at line 2" in out.content and "SyntaxError" in out.content
    assert "the file was written; fix it" in out.content
    fine = run_tool(ws, "write_file", {"path": "web/ok.js", "content": "const a = 1;\n"},
                    POLICY)
    assert fine.content == "created web/ok.js (1 line)"
