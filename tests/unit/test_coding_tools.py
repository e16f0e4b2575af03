"""The coding agent's file tools on a real filesystem: confinement, edits, reads, listings.

Nothing here starts a process (those tests are in tests/integration/test_coding_tools.py).
Every path escape must come back as an error result, never as an exception and never as
a file touched outside the workspace.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tasks.coding import file_tools
from tasks.coding.bwrap_fence import Host
from tasks.coding.fence import RunPolicy, sandbox_env
from tasks.coding.output_cap import OutputCap
from tasks.coding.tools import (
    READ_ONLY_TOOLS,
    TOOL_SCHEMAS,
    ToolOutcome,
    run_tool,
    schemas_for,
)
from tasks.coding.unshare_fence import namespace_flags, sandbox_argv
from tasks.coding.workspace import ToolError, Workspace, nested_repositories, workspace_for

POLICY = RunPolicy(timeout_seconds=5, memory_mb=512, output_chars=2000)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding a secret the tools must never reach."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("the server's secret\n")
    return d


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Workspace:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "src" / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "README.md").write_text("hello\n")
    (root / "link_out").symlink_to(outside / "secret.txt")  # a file link leading out
    (root / "dir_out").symlink_to(outside)  # a directory link leading out
    (root / "etc").symlink_to("/etc")
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    (root / "git_alias").symlink_to(root / ".git")
    (root / "inner_link").symlink_to(root / "src" / "app.py")  # inside: allowed
    return Workspace(root)


def call(ws: Workspace, name: str, **inputs: object) -> ToolOutcome:
    return run_tool(ws, name, dict(inputs), POLICY)


ESCAPES = [
    ("../outside/secret.txt", "escapes", "dot-dot traversal"),
    ("src/../../outside/secret.txt", "escapes", "traversal through a real directory"),
    ("/etc/passwd", "escapes", "an absolute path outside"),
    ("etc/passwd", "escapes", "through a symlink to /etc"),
    ("link_out", "escapes", "a final component that is a symlink leading out"),
    ("dir_out/secret.txt", "escapes", "a symlinked directory leading out"),
    ("dangling", "escapes", "a dangling symlink whose target is outside (write would create it)"),
    (".git/config", ".git", "git internals"),
    ("git_alias/config", ".git", "git internals through a symlink"),
    ("src/../.git/HEAD", ".git", "git internals by traversal"),
]


@pytest.mark.parametrize(("path", "word", "why"), ESCAPES, ids=[e[2] for e in ESCAPES])
def test_every_way_out_of_the_workspace_is_a_tool_error(
        ws: Workspace, outside: Path, path: str, word: str, why: str) -> None:
    for name, inputs in [("read_file", {}), ("write_file", {"content": "pwned\n"}),
                         ("edit_file", {"old": "secret", "new": "pwned"}), ("list_files", {}),
                         ]:
        outcome = call(ws, name, path=path, **inputs)
        assert outcome.is_error, (name, outcome)
        assert word in outcome.content and path in outcome.content
        assert not outcome.changed
    assert (outside / "secret.txt").read_text() == "the server's secret\n"
    assert not (outside / "not-yet.txt").exists()
    assert (ws.root / ".git" / "config").read_text() == "[core]\n"


def test_resolve_allows_paths_that_stay_inside(ws: Workspace) -> None:
    real = ws.real_root
    assert ws.resolve("src/../README.md") == real / "README.md"
    assert ws.resolve(str(real / "src" / "app.py")) == real / "src" / "app.py"
    assert ws.resolve("inner_link") == real / "src" / "app.py"
    assert ws.resolve(".") == real
    assert ws.rel(real / "src" / "app.py") == "src/app.py"
    assert ws.rel(real) == "."
    for bad in ["", "  ", "a\x00b"]:
        with pytest.raises(ToolError):
            ws.resolve(bad)


def test_workspace_for_is_the_job_directory_under_the_workspaces_dir(tmp_path: Path,
                                                                     monkeypatch) -> None:
    from tasks.settings import get_settings

    monkeypatch.setenv("SWITCHYARD_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    try:
        ws = workspace_for("0b6f1c1e-5a7e-4c1b-9a53-2f4f4d9b8a10")
        assert ws.root == tmp_path / "data" / "workspaces" / "0b6f1c1e-5a7e-4c1b-9a53-2f4f4d9b8a10"
        # Passable to reach one's own checkout, but no listing of the others.
        assert (ws.root.parent.stat().st_mode & 0o777) == 0o711
        for bad in ["../x", "a/b", "..", "", "-rf"]:
            with pytest.raises(ValueError):
                workspace_for(bad)
    finally:
        get_settings.cache_clear()


def test_nested_repositories_are_found_whatever_their_git_is(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # the checkout's own: not nested
    (tmp_path / "a" / "b" / ".git").mkdir(parents=True)  # a planted repository
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".git").write_text("gitdir: ../.git/modules/c\n")  # a submodule
    (tmp_path / "d").mkdir()
    assert nested_repositories(tmp_path) == ["a/b", "c"]


def test_read_file_numbers_the_lines_of_the_range_asked_for(ws: Workspace) -> None:
    (ws.root / "ten.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    out = call(ws, "read_file", path="ten.txt", start_line=3, end_line=5)
    assert not out.is_error
    assert out.content.splitlines() == ["     3\tline 3", "     4\tline 4", "     5\tline 5"]
    whole = call(ws, "read_file", path="ten.txt").content
    assert whole.splitlines()[0] == "     1\tline 1" and whole.splitlines()[-1] == "    10\tline 10"
    past = call(ws, "read_file", path="ten.txt", start_line=11)
    assert past.is_error and "has 10 lines" in past.content
    backwards = call(ws, "read_file", path="ten.txt", start_line=5, end_line=2)
    assert backwards.is_error and "before start_line" in backwards.content


def test_read_file_caps_a_long_file_and_says_where_to_go_on(ws: Workspace) -> None:
    (ws.root / "long.txt").write_text("".join(f"{n}\n" for n in range(1, 1001)))
    out = call(ws, "read_file", path="long.txt", start_line=101)
    lines = out.content.splitlines()
    assert lines[0] == "   101\t101"
    assert len(lines) == file_tools.READ_MAX_LINES + 1
    last = 100 + file_tools.READ_MAX_LINES
    assert lines[-1] == (f"[lines 101-{last} of 1000 shown; read more with "
                         f"start_line={last + 1}]")


def test_read_file_cuts_an_overlong_line_without_losing_the_line_count(ws: Workspace) -> None:
    (ws.root / "min.js").write_text("first\n" + "x" * 5_000_000 + "\nthird\n")
    out = call(ws, "read_file", path="min.js").content.splitlines()
    assert out[0] == "     1\tfirst" and out[2] == "     3\tthird"
    assert out[1] == "     2\t" + "x" * file_tools.LINE_MAX_CHARS + " [... rest of the line cut]"


def test_edit_file_refuses_a_file_too_large_to_hold(ws: Workspace, monkeypatch) -> None:
    monkeypatch.setattr(file_tools, "EDIT_MAX_BYTES", 100)
    (ws.root / "big.txt").write_text("y\n" * 100)
    out = call(ws, "edit_file", path="big.txt", old="y", new="z")
    assert out.is_error and "too large for edit_file (200 bytes" in out.content


def test_read_file_refuses_binaries_directories_fifos_and_missing_files(ws: Workspace) -> None:
    (ws.root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    os.mkfifo(ws.root / "pipe")  # opening it would block the worker forever
    for path, says in [("blob.bin", "binary file"), ("src", "is a directory"),
                       ("pipe", "not a regular file"), ("nope.txt", "No such file")]:
        out = call(ws, "read_file", path=path)
        assert out.is_error and says in out.content and path in out.content, out
        assert str(ws.real_root) not in out.content  # the worker's own paths stay private


def test_edit_file_names_how_many_matches_when_not_exactly_one(ws: Workspace) -> None:
    (ws.root / "twice.py").write_text("x = 1\ny = 2\nx = 1\n")
    none = call(ws, "edit_file", path="twice.py", old="z = 3", new="z = 4")
    assert none.is_error and "0 matches" in none.content and "twice.py" in none.content
    two = call(ws, "edit_file", path="twice.py", old="x = 1", new="x = 5")
    assert two.is_error and "2 matches (at lines 1, 3)" in two.content
    assert (ws.root / "twice.py").read_text() == "x = 1\ny = 2\nx = 1\n"  # untouched
    one = call(ws, "edit_file", path="twice.py", old="y = 2", new="y = 3")
    assert not one.is_error and one.changed and "edited twice.py at line 2" in one.content
    assert (ws.root / "twice.py").read_text() == "x = 1\ny = 3\nx = 1\n"


def test_edit_file_counts_overlapping_matches_and_keeps_crlf(ws: Workspace) -> None:
    (ws.root / "aaa.txt").write_text("aaa\n")
    assert "2 matches" in call(ws, "edit_file", path="aaa.txt", old="aa", new="b").content
    (ws.root / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    out = call(ws, "edit_file", path="dos.txt", old="one\ntwo", new="uno\ndos")
    assert not out.is_error, out
    assert (ws.root / "dos.txt").read_bytes() == b"uno\r\ndos\r\nthree\r\n"


def test_write_file_creates_parents_and_reports_a_python_syntax_error(ws: Workspace) -> None:
    out = call(ws, "write_file", path="pkg/sub/mod.py",
               content="def ok():\n    return 1\n\ndef broken(:\n    pass\n")
    assert not out.is_error and out.changed  # the write happened
    assert (ws.root / "pkg" / "sub" / "mod.py").exists()
    assert "syntax error at line 4" in out.content
    assert "the file was written; fix it" in out.content
    clean = call(ws, "write_file", path="pkg/sub/mod.py", content="X = 1\n")
    assert clean.content == "overwrote pkg/sub/mod.py (1 line)"


def test_lint_on_edit_compiles_but_never_runs_the_code(ws: Workspace, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\nimport os\nos._exit(3)\n"
    out = call(ws, "write_file", path="evil.py", content=source)
    assert not out.is_error and "syntax error" not in out.content
    assert not marker.exists()
    edited = call(ws, "edit_file", path="src/app.py", old="return a + b", new="return a +")
    assert "syntax error at line 2" in edited.content and not edited.is_error


def test_write_file_hands_new_files_to_the_sandbox_user(ws: Workspace) -> None:
    if os.geteuid() != 0:
        pytest.skip("ownership is handed over only when the worker runs as root")
    call(ws, "write_file", path="new/dir/f.txt", content="x\n")
    for p in [ws.root / "new", ws.root / "new" / "dir", ws.root / "new" / "dir" / "f.txt"]:
        assert (p.stat().st_uid, p.stat().st_gid) == (POLICY.uid, POLICY.gid)


def test_list_files_skips_tooling_directories_and_never_follows_links(ws: Workspace) -> None:
    for d in ["node_modules/left-pad", "src/__pycache__", ".venv/bin"]:
        (ws.root / d).mkdir(parents=True)
        (ws.root / d / "f").write_text("x")
    out = call(ws, "list_files", path=".", depth=3)
    listed = out.content.splitlines()
    assert "src/" in listed and "src/app.py" in listed and "README.md" in listed
    assert "dir_out@" in listed and "etc@" in listed  # shown as links, not entered
    assert not any(x.startswith(("node_modules", ".git", ".venv", "dir_out/", "etc/"))
                   or "__pycache__" in x for x in listed), listed
    assert "secret.txt" not in out.content


def test_list_files_caps_the_listing_breadth_first(ws: Workspace, monkeypatch) -> None:
    monkeypatch.setattr(file_tools, "LIST_MAX_ENTRIES", 5)
    deep = ws.root / "a" / "b" / "c"
    deep.mkdir(parents=True)
    for n in range(10):
        (deep / f"f{n}").write_text("")
    out = call(ws, "list_files", depth=5)
    lines = out.content.splitlines()
    assert len(lines) == 6 and lines[-1].startswith("[listing stopped at 5 entries")
    assert "README.md" in lines  # the top level came first


@pytest.mark.parametrize(("name", "inputs", "says"), [
    ("rm_rf", {"path": "."}, "unknown tool 'rm_rf'"),
    ("read_file", {}, "'path' is a required property"),
    ("read_file", {"path": 7}, "7 is not of type 'string'"),
    ("read_file", {"path": "README.md", "start_line": "1"}, "'1' is not of type 'integer'"),
    ("read_file", {"path": "README.md", "start_line": 0}, "less than the minimum of 1"),
    ("edit_file", {"path": "README.md", "old": "", "new": "x"}, "should be non-empty"),
    ("write_file", {"path": "x", "content": "y", "mode": "0777"}, "'mode' was unexpected"),
    ("run", {"command": "true", "timeout_seconds": -1}, "less than or equal to the minimum"),
    ("list_files", {"depth": True}, "True is not of type 'integer'"),
], ids=["unknown tool", "missing field", "wrong type", "string for a number", "out of range",
        "empty old", "unexpected field", "negative timeout", "bool is not a number"])
def test_bad_calls_are_error_results_naming_the_problem(ws: Workspace, name: str,
                                                        inputs: dict, says: str) -> None:
    out = run_tool(ws, name, inputs, POLICY)
    assert out.is_error and not out.changed
    assert says in out.content, out.content


def test_input_that_is_not_an_object_is_an_error_result(ws: Workspace) -> None:
    out = run_tool(ws, "read_file", ["README.md"], POLICY)  # type: ignore[arg-type]
    assert out.is_error and "JSON object" in out.content


def test_the_tool_contract_is_pinned() -> None:
    """Recorded sessions replay these names and inputs: a change here breaks them."""
    contract = {s["name"]: (sorted(s["input_schema"]["properties"]),
                            sorted(s["input_schema"]["required"])) for s in TOOL_SCHEMAS}
    assert contract == {
        "list_files": (["depth", "path"], []),
        "read_file": (["end_line", "path", "start_line"], ["path"]),
        "write_file": (["content", "path"], ["content", "path"]),
        "edit_file": (["new", "old", "path"], ["new", "old", "path"]),
        "search": (["path", "pattern"], ["pattern"]),
        "run": (["command", "timeout_seconds"], ["command"]),
        "finish": (["summary"], ["summary"]),
    }
    assert all(s["description"] and s["input_schema"]["type"] == "object" for s in TOOL_SCHEMAS)
    assert [s["name"] for s in schemas_for(READ_ONLY_TOOLS)] == [
        "list_files", "read_file", "search", "finish"]


def test_finish_changes_nothing(ws: Workspace) -> None:
    assert call(ws, "finish", summary="done") == ToolOutcome("finished", False, False)


# --- the sandbox's pure parts -------------------------------------------------------------


def test_output_cap_keeps_the_head_and_the_tail_and_counts_the_cut() -> None:
    cap = OutputCap(100)
    text = "".join(f"{n:04}|" for n in range(1000))  # 5,000 characters
    for i in range(0, len(text), 7):
        cap.feed(text[i:i + 7])
    assert cap.truncated and cap.total == 5000
    assert cap.text() == f"{text[:40]}\n[... 4910 characters cut ...]\n{text[-50:]}"
    small = OutputCap(100)
    small.feed("x" * 100)
    assert not small.truncated and small.text() == "x" * 100


def test_the_command_is_one_argument_behind_every_fence_of_the_unshare_fallback() -> None:
    host = Host(as_root=True, bash="/bin/bash", prlimit="/usr/bin/prlimit", bwrap=None,
                unshare="/usr/bin/unshare", setpriv="/usr/bin/setpriv")
    nasty = "echo $(id); rm -rf / --no-preserve-root; '\"` --net"
    ns = ["/usr/bin/unshare", *namespace_flags(POLICY, True)[0], "--"]
    argv = sandbox_argv(nasty, POLICY, host, ns)
    assert argv[-1] == nasty and argv.count(nasty) == 1
    assert argv.index("/usr/bin/unshare") < argv.index("/usr/bin/prlimit") \
        < argv.index("/usr/bin/setpriv") < argv.index("/bin/bash")
    assert "--net" in argv and "--reuid=65534" in argv and "--no-new-privs" in argv
    assert "--data=536870912" in argv
    [online] = namespace_flags(RunPolicy(5, 512, 2000, network=True), True)
    assert "--net" in online and "--pid" in online  # no way out but bubblewrap's proxy
    unprivileged = namespace_flags(POLICY, False)
    assert [f[:2] for f in unprivileged] == [["--user", "--map-current-user"],
                                            ["--user", "--map-root-user"]]
    assert all("--net" in f for f in unprivileged)


def test_the_sandbox_environment_is_an_allow_list(tmp_path: Path) -> None:
    env = sandbox_env(tmp_path)
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG", "TERM", "CI",
                        "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE"}
    assert env["PYTHONNOUSERSITE"] == "1"  # no .pth from a HOME runs in the command's Python
    assert env["HOME"] == str(tmp_path) and env["CI"] == "true" and env["LANG"] == "C.UTF-8"


def test_the_file_tools_refuse_a_file_hard_linked_from_outside(ws: Workspace,
                                                              outside: Path) -> None:
    # Given a file of the worker's, hard-linked into the workspace (a command could do it)
    secret = outside / "secret.txt"
    os.link(secret, ws.root / "linked.txt")
    # Then no file tool reads or changes it through the link
    for name, inputs in [("read_file", {"path": "linked.txt"}),
                         ("write_file", {"path": "linked.txt", "content": "owned\n"}),
                         ("edit_file", {"path": "linked.txt", "old": "secret", "new": "x"})]:
        out = call(ws, name, **inputs)
        assert out.is_error and "hard link" in out.content, (name, out.content)
    assert secret.read_text() == "the server's secret\n"
