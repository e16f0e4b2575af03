"""The coding agent's git, with real git: which repositories may be cloned, the workspace's
patch and its exact restore, commit and push to a bare remote, retried."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tasks.coding import git, gitcmd
from tasks.engine.errors import PermanentError, RetryableError
from tasks.services import egress
from tests.support.git_http import basic, git_http_server

ALLOW_LOOPBACK = egress.Allow.parse("127.0.0.1")


def sh(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    root = tmp_path / "repos"
    root.mkdir()
    return root


@pytest.fixture
def remote(roots: Path) -> Path:
    """A bare repository under the local roots, holding one commit on main."""
    work = roots / "seed"
    sh("init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text("# demo\n")
    (work / "src").mkdir()
    (work / "src" / "app.py").write_text("print('hello')\n")
    (work / "src" / "old.py").write_text("gone soon\n")
    (work / "docs").mkdir()
    (work / "docs" / "a.md").write_text("a\n")
    (work / "logo.bin").write_bytes(bytes(range(256)) * 4)
    (work / "run.sh").write_text("#!/bin/sh\necho run\n")
    (work / ".gitignore").write_text("build/\n*.pyc\n")
    sh("add", "-A", cwd=work)
    sh("commit", "-qm", "init", cwd=work)
    bare = roots / "remote.git"
    sh("clone", "-q", "--bare", str(work), str(bare))
    return bare


def snapshot(root: Path) -> dict[str, tuple[str, object]]:
    """Every file of a workspace but the gitfile: kind, executable bit, bytes or link."""
    out: dict[str, tuple[str, object]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if rel == ".git":
                continue
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            else:
                out[rel] = ("x" if path.stat().st_mode & stat.S_IXUSR else "f",
                            path.read_bytes())
    return out


def edit(ws: Path) -> None:
    """Every kind of change a workspace can hold."""
    (ws / "src" / "app.py").write_text("print('hello, world')\n")        # edit
    (ws / "src" / "old.py").unlink()                                      # delete
    (ws / "docs" / "a.md").unlink()                                       # a whole directory
    (ws / "docs").rmdir()
    (ws / "pkg" / "deep").mkdir(parents=True)                             # new, nested
    (ws / "pkg" / "deep" / "mod.py").write_text("X = 1\n")
    (ws / "pkg" / "empty.txt").write_bytes(b"")                           # empty
    (ws / "logo.bin").write_bytes(bytes(reversed(range(256))) * 8 + b"\0")  # binary, edited
    (ws / "new.bin").write_bytes(os.urandom(3000))                        # binary, new
    (ws / "latin1.txt").write_bytes(b"caf\xe9 cr\xe8me\n")                # not UTF-8
    (ws / "run.sh").chmod(0o755)                                          # mode
    os.symlink("src/app.py", ws / "link.py")                              # symlink
    (ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")                      # CRLF kept as is


def test_a_path_under_the_local_roots_is_accepted_and_its_real_path_used(roots, remote):
    source = git.check_source(str(remote), [roots])
    assert source == git.Source(str(remote.resolve()), "local")
    assert git.check_source(f"file://{remote}", [roots]) == source


@pytest.mark.parametrize(("form", "why"), [
    ("path", "is not under"), ("file", "is not under"),
    ("symlink", "is not under"), ("dotdot", "is not under"),
])
def test_a_local_repository_outside_the_roots_is_refused(tmp_path, roots, form, why):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (roots / "link").symlink_to(outside)  # inside the roots, pointing out of them
    url = {"path": str(outside), "file": f"file://{outside}", "symlink": str(roots / "link"),
           "dotdot": f"{roots}/../elsewhere"}[form]
    with pytest.raises(PermanentError, match=why):
        git.check_source(url, [roots])


def test_local_repositories_are_off_without_roots(remote):
    with pytest.raises(PermanentError, match=r"local repositories are off.*SWITCHYARD_LOCAL"):
        git.check_source(str(remote), [])


@pytest.mark.parametrize(("url", "why"), [
    ("-uevil", "starts with '-'"),
    ("--upload-pack=touch /tmp/x", "starts with '-'"),
    ("ssh://git@github.com/o/r.git", "ssh://"),
    ("git://github.com/o/r.git", "git://"),
    ("git@github.com:o/r.git", "ssh address"),
    ("ext::sh -c touch% /tmp/x", "transport"),
    ("https://user:ghp_secret@github.com/o/r.git", "credentials"),
    ("https://ghp_secret@github.com/o/r.git", "credentials"),
    ("file://otherhost/srv/r", "host"),
    ("relative/path", "neither a URL nor an absolute path"),
    ("https://github.com/o/r\n.git", "control characters"),
])
def test_transports_options_and_credentials_are_refused(roots, url, why):
    assert why in (git.url_problem(url) or "")
    with pytest.raises(PermanentError, match="repo_url"):
        git.check_source(url, [roots], allow=ALLOW_LOOPBACK)


def test_https_goes_through_the_egress_guard_and_http_needs_the_operators_allow(roots):
    public = lambda host, port: ["140.82.112.3"]  # noqa: E731 - github.com, say
    private = lambda host, port: ["10.1.2.3"]  # noqa: E731
    nothing = egress.Allow()
    assert git.check_source("https://github.com/o/r.git", [roots], allow=nothing,
                            resolver=public).kind == "https"
    with pytest.raises(PermanentError, match=r"10\.1\.2\.3 is a private"):
        git.check_source("https://git.internal/o/r.git", [roots], allow=nothing,
                         resolver=private)
    with pytest.raises(PermanentError, match="http:// is only for hosts"):
        git.check_source("http://github.com/o/r.git", [roots], allow=nothing, resolver=public)
    assert git.check_source("http://127.0.0.1:9/r.git", [roots],
                            allow=ALLOW_LOOPBACK).kind == "http"


def test_changes_then_restore_reproduce_the_workspace_exactly(tmp_path, roots, remote):
    # Given a clone with every kind of change, and an ignored build directory
    source = git.check_source(str(remote), [roots])
    ws = tmp_path / "workspaces" / "job1"
    base = git.clone(source, ws)
    edit(ws)
    (ws / "build").mkdir()
    (ws / "build" / "out.o").write_bytes(b"ignored")
    patch = git.changes(ws, base)
    expected = snapshot(ws)
    del expected["build/out.o"]  # ignored: not part of the work

    # When a fresh clone on another machine is restored from base + patch
    again = tmp_path / "other-machine" / "job1"
    git.clone(source, again)
    git.restore(again, base, patch)
    # Then it is the same tree, byte for byte, mode for mode
    assert snapshot(again) == expected

    # And restoring in place throws away whatever came after (edits, junk, ignored files)
    (ws / "src" / "app.py").write_text("later edit\n")
    (ws / "junk.txt").write_text("junk")
    git.restore(ws, base, patch)
    assert snapshot(ws) == expected
    # The patch is text a step output can hold, and taking it twice gives the same one
    assert patch.isascii() and git.changes(ws, base) == patch


def test_step_patches_chain_to_the_workspace_and_each_holds_only_its_own_change(
        tmp_path, roots, remote):
    # Issue 23: a coding job stored the whole-workspace patch in every changing tool step.
    source = git.check_source(str(remote), [roots])
    ws = tmp_path / "workspaces" / "job1"
    base = git.clone(source, ws)
    lines = [f"line {i}\n" for i in range(20_000)]  # ~200 KB, written once
    (ws / "big.txt").write_text("".join(lines))
    trees = [git.snapshot(ws, base)]
    patches = [git.delta(ws, base, trees[0])]
    for i in range(5):  # then five small edits of it
        lines[i * 1000] = f"edited {i}\n"
        (ws / "big.txt").write_text("".join(lines))
        trees.append(git.snapshot(ws, base))
        patches.append(git.delta(ws, trees[-2], trees[-1]))
    edit(ws)  # and every other kind of change, in one more step
    trees.append(git.snapshot(ws, base))
    patches.append(git.delta(ws, trees[-2], trees[-1]))
    assert len(patches[0]) > 150_000
    assert all(len(p) < 2_000 for p in patches[1:6]), [len(p) for p in patches]
    expected = snapshot(ws)
    # Another machine applies them in turn and has the same files and the same tree
    again = tmp_path / "other-machine" / "job1"
    git.clone(source, again)
    git.restore(again, base, patches)
    assert snapshot(again) == expected
    assert git.snapshot(again, base) == trees[-1]
    # An object id is all a step's patch may name
    with pytest.raises(PermanentError):
        git.delta(ws, "--output=/tmp/x", trees[-1])


def test_an_empty_patch_restores_the_base(tmp_path, roots, remote):
    ws = tmp_path / "ws"
    base = git.clone(git.check_source(str(remote), [roots]), ws)
    clean = snapshot(ws)
    assert git.changes(ws, base) == ""
    (ws / "README.md").write_text("changed")
    git.restore(ws, base, "")
    assert snapshot(ws) == clean


def test_diff_stat_and_text_show_the_work(tmp_path, roots, remote):
    ws = tmp_path / "ws"
    base = git.clone(git.check_source(str(remote), [roots]), ws)
    edit(ws)
    stats = {s.path: (s.added, s.deleted) for s in git.diff_stat(ws, base)}
    assert stats["src/app.py"] == (1, 1) and stats["src/old.py"] == (0, 1)
    assert stats["new.bin"] == (None, None) and stats["pkg/deep/mod.py"] == (1, 0)
    text = git.diff_text(ws, base, 100_000)
    assert "+print('hello, world')" in text and "Binary files" in text
    cut = git.diff_text(ws, base, 100)
    assert len(cut) < 150 and cut.endswith("(diff cut here)\n")
    # A diff far past the limit: git is stopped, not read to the end
    (ws / "big.txt").write_text("line\n" * 500_000)
    cut = git.diff_text(ws, base, 1000)
    assert len(cut) < 1050 and cut.endswith("(diff cut here)\n")
    with pytest.raises(git.PatchTooLarge):
        git.changes(ws, base, limit=100_000)
    with pytest.raises(PermanentError, match="clone it first"):
        git.restore(tmp_path / "never-cloned", base, "")


def test_a_sandbox_cannot_configure_the_workers_git(tmp_path, roots, remote):
    # Given a sandboxed command that pointed the workspace's .git at a repository of its
    # own, whose config runs a command on any status, add or diff
    ws = tmp_path / "ws"
    base = git.clone(git.check_source(str(remote), [roots]), ws)
    evil = tmp_path / "evil"
    sh("init", "-q", str(evil))
    marker = tmp_path / "pwned"
    with open(evil / ".git" / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n")
    (ws / ".git").write_text(f"gitdir: {evil / '.git'}\n")
    # (git itself, pointed at it, would run that command)
    subprocess.run(["git", "-c", "safe.directory=*", "status"], cwd=ws, capture_output=True,
                   env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}, check=False)
    assert marker.exists()
    marker.unlink()
    (ws / "src" / "app.py").write_text("changed\n")
    # When the worker takes the patch, the stats and commits
    patch = git.changes(ws, base)
    git.diff_stat(ws, base)
    git.commit_and_push(ws, branch="switchyard/sandbox", message="m", token=None)
    # Then nothing ran, the work is there, and a restore puts the gitfile back
    assert not marker.exists()
    assert "+changed" in patch
    git.restore(ws, base, patch)
    assert (ws / ".git").read_text() == f"gitdir: {git.git_dir(ws)}\n"


def test_commit_and_push_lands_the_branch_and_a_retry_changes_nothing(tmp_path, roots, remote):
    source = git.check_source(str(remote), [roots])
    ws = tmp_path / "ws"
    base = git.clone(source, ws)
    edit(ws)
    branch = git.branch_name("0f1e2d3c-aaaa-bbbb-cccc-000000000000", "Fix the README!")
    assert branch == "switchyard/0f1e2d3c-fix-the-readme"

    commit = git.commit_and_push(ws, branch=branch, message="Fix the README", token=None)
    assert sh("--git-dir", str(remote), "rev-parse", f"refs/heads/{branch}") == commit
    assert sh("--git-dir", str(remote), "rev-parse", f"{commit}^") == base
    author = sh("--git-dir", str(remote), "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", commit)
    assert author == ("Switchyard Agent <agent@switchyard.local>|Switchyard Agent "
                      "<agent@switchyard.local>|Fix the README")

    # The same call again (a retried step): the same commit, nothing new pushed
    assert git.commit_and_push(ws, branch=branch, message="Fix the README", token=None) == commit
    # A crash after the push: another machine restores base + patch and commits again
    patch = git.changes(ws, base)
    other = tmp_path / "other"
    git.clone(source, other)
    git.restore(other, base, patch)
    assert git.commit_and_push(other, branch=branch, message="Fix the README",
                               token=None) == commit
    assert sh("--git-dir", str(remote), "rev-list", "--count", f"{base}..{branch}") == "1"

    # More work later follows the pushed commit (a fast-forward)
    (other / "more.txt").write_text("more\n")
    second = git.commit_and_push(other, branch=branch, message="More", token=None)
    assert sh("--git-dir", str(remote), "rev-parse", f"{second}^") == commit
    assert sh("--git-dir", str(remote), "rev-parse", f"refs/heads/{branch}") == second
    # The default branch is untouched
    assert sh("--git-dir", str(remote), "rev-parse", "refs/heads/main") == base


def test_nothing_to_commit_and_a_branch_someone_else_moved_are_refused(tmp_path, roots, remote):
    source = git.check_source(str(remote), [roots])
    ws = tmp_path / "ws"
    git.clone(source, ws)
    with pytest.raises(git.NothingToCommit):
        git.commit_and_push(ws, branch="switchyard/empty", message="m", token=None)
    with pytest.raises(git.NothingToCommit):  # the branch it was cloned from, unchanged
        git.commit_and_push(ws, branch="main", message="m", token=None)

    # Someone else pushed unrelated history to the branch name this job uses
    other = tmp_path / "someone"
    sh("clone", "-q", str(remote), str(other))
    (other / "theirs.txt").write_text("theirs\n")
    sh("add", "-A", cwd=other)
    sh("commit", "-qm", "theirs", cwd=other)
    sh("push", "-q", "origin", "HEAD:refs/heads/switchyard/taken", cwd=other)
    ours = tmp_path / "ours"
    git.clone(source, ours)
    (ours / "ours.txt").write_text("ours\n")
    # Their commit follows our base, but ours is the whole tree: pushed, it would undo theirs
    with pytest.raises(PermanentError, match="commits this job did not make"):
        git.commit_and_push(ours, branch="switchyard/taken", message="m", token=None)
    # Nor is history that no longer contains ours (a force-push over the agent's commit)
    pushed = git.commit_and_push(ours, branch="switchyard/mine", message="m", token=None)
    sh("push", "-q", "-f", "origin", "HEAD:refs/heads/switchyard/mine", cwd=other)
    (ours / "ours2.txt").write_text("more\n")
    with pytest.raises(PermanentError, match="commits this job did not make"):
        git.commit_and_push(ours, branch="switchyard/mine", message="m2", token=None)
    theirs = sh("rev-parse", "HEAD", cwd=other)
    assert pushed != theirs
    for branch in ("switchyard/taken", "switchyard/mine"):
        assert sh("--git-dir", str(remote), "rev-parse", branch) == theirs


def push_a_commit(remote: Path, work: Path, branch: str, name: str) -> str:
    """One commit adding file `name` on top of the remote's default branch, pushed to
    `branch`, by a clone in `work`; the commit."""
    sh("clone", "-q", str(remote), str(work))
    (work / name).write_text(f"{name}\n")
    sh("add", "-A", cwd=work)
    sh("commit", "-qm", name, cwd=work)
    sh("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=work)
    return sh("rev-parse", "HEAD", cwd=work)


def test_clone_of_a_branch_and_of_a_missing_branch(tmp_path, roots, remote):
    source = git.check_source(str(remote), [roots])
    pushed = push_a_commit(remote, tmp_path / "w", "feature/x", "feature.txt")
    head = git.clone(source, tmp_path / "ws", branch="feature/x")
    assert head == pushed
    assert (tmp_path / "ws" / "feature.txt").exists()
    with pytest.raises(PermanentError, match="not found"):
        git.clone(source, tmp_path / "ws2", branch="nope")
    assert not (tmp_path / "ws2").exists() and not git.git_dir(tmp_path / "ws2").exists()
    with pytest.raises(PermanentError, match="branch"):
        git.clone(source, tmp_path / "ws3", branch="-x")


def test_a_local_clone_holds_only_the_branch_it_was_asked_for(tmp_path, roots, remote):
    # A local repository is shared by every tenant: a clone of main must not carry another
    # tenant's pushed branch, neither as a ref nor as objects
    source = git.check_source(str(remote), [roots])
    theirs = push_a_commit(remote, tmp_path / "w", "switchyard/0badc0de-theirs", "theirs.txt")
    git.clone(source, tmp_path / "ws")
    repo = str(git.git_dir(tmp_path / "ws"))
    refs = sh("--git-dir", repo, "for-each-ref", "--format=%(refname)")
    assert "0badc0de" not in refs, refs
    missing = subprocess.run(["git", "--git-dir", repo, "cat-file", "-e", theirs],
                             capture_output=True)
    assert missing.returncode != 0


def test_an_empty_repository_gets_the_same_empty_base_on_every_machine(tmp_path, roots):
    empty = roots / "empty.git"
    sh("init", "-q", "--bare", str(empty))
    source = git.check_source(str(empty), [roots])
    base = git.clone(source, tmp_path / "one")
    assert git.clone(source, tmp_path / "two") == base
    (tmp_path / "one" / "app.py").write_text("print(1)\n")
    git.restore(tmp_path / "two", base, git.changes(tmp_path / "one", base))
    assert snapshot(tmp_path / "two") == snapshot(tmp_path / "one")
    commit = git.commit_and_push(tmp_path / "two", branch="main", message="First", token=None)
    assert sh("--git-dir", str(empty), "rev-parse", "main") == commit


@pytest.mark.parametrize(("task", "expected"), [
    ("Fix the README!", "switchyard/12345678-fix-the-readme"),
    ("   ", "switchyard/12345678-task"),
    ("Ünïcode & symbols: a/b..c", "switchyard/12345678-unicode-symbols-a-b-c"),
    ("x" * 100, "switchyard/12345678-" + "x" * 40),
    ("ends with a dash " + "-" * 50, "switchyard/12345678-ends-with-a-dash"),
])
def test_branch_names_are_short_slugs_git_accepts(task, expected):
    name = git.branch_name("12345678-9abc-def0-1234-56789abcdef0", task)
    assert name == expected
    subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], check=True)


# --- over smart HTTP, with a token --------------------------------------------------------

GIT_TOKEN = "ghs_gitHttpToken_0123456789abcdefXYZ"


def _everywhere(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_token_goes_in_a_header_and_nowhere_else(tmp_path, roots, remote, monkeypatch):
    # The host name resolves nowhere but in the egress guard: git can only reach the server
    # through the address the guard checked and pinned.
    real = egress.system_resolver
    monkeypatch.setattr(egress, "system_resolver", lambda host, port: (
        ["127.0.0.1"] if host == "git.test" else real(host, port)))
    with git_http_server(roots, GIT_TOKEN) as server:
        url = server.url.replace("127.0.0.1", "git.test") + "/remote.git"
        source = git.check_source(url, [roots])
        assert source.kind == "http"
        ws = tmp_path / "ws"
        base = git.clone(source, ws, token=GIT_TOKEN)
        assert base == sh("--git-dir", str(remote), "rev-parse", "main")
        assert server.authorizations and set(server.authorizations) == {basic(GIT_TOKEN)}

        (ws / "README.md").write_text("# demo, fixed\n")
        commit = git.commit_and_push(ws, branch="switchyard/http", message="Fix",
                                     token=GIT_TOKEN)
        assert sh("--git-dir", str(remote), "rev-parse", "refs/heads/switchyard/http") == commit
        assert any(p.endswith("git-receive-pack") for p in server.paths)
        assert set(server.authorizations) == {basic(GIT_TOKEN)}

        # Not in the repository's config, not in any file of the workspace or repository
        stored = _everywhere(ws) + _everywhere(git.git_dir(ws))
        assert GIT_TOKEN.encode() not in stored and basic(GIT_TOKEN).encode() not in stored
        assert sh("--git-dir", str(git.git_dir(ws)), "config", "remote.origin.url") == url

        # A wrong token fails for good, and the message names neither token
        wrong = "ghs_wrongToken_zzzzzzzzzzzzzzzzzzzz"
        with pytest.raises(PermanentError) as caught:
            git.clone(source, tmp_path / "ws2", token=wrong)
        for secret in (wrong, GIT_TOKEN, basic(wrong).split()[1]):
            assert secret not in str(caught.value)
        with pytest.raises(PermanentError):
            git.clone(source, tmp_path / "ws3", token=None)


def test_a_git_command_past_its_time_is_killed_and_retried_later():
    # A server that accepts the connection and never answers
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/r.git"
        started = time.monotonic()
        with pytest.raises(RetryableError, match="took longer than 1 s"):
            gitcmd.run(["ls-remote", url], timeout=1.0)
        assert time.monotonic() - started < 10
