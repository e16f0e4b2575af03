"""The bubblewrap fence's argv: what each command is given, read off the argv (no process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.coding.bwrap_fence import (
    BRIDGE_SCRIPT,
    EGRESS_DIR,
    ENV_DIR,
    HOME,
    Host,
    Mounts,
    bwrap_argv,
    probe_argv,
    system_binds,
)
from tasks.coding.fence import RunPolicy, SandboxUnavailable, searchable, unpassable

POLICY = RunPolicy(timeout_seconds=5, memory_mb=512, output_chars=2000)
ROOT = Host(as_root=True, bash="/bin/bash", prlimit="/usr/bin/prlimit", bwrap="/usr/bin/bwrap",
            setpriv="/usr/bin/setpriv", unshare="/usr/bin/unshare")
WORKER = Host(as_root=False, bash="/bin/bash", prlimit="/usr/bin/prlimit",
              bwrap="/usr/bin/bwrap", setpriv="/usr/bin/setpriv", unshare=None)
MOUNTS = Mounts(workspace=Path("/data/ws/job"), git=Path("/data/ws/job/.git"),
                tmp=Path("/tmp/switchyard-cmd-x/tmp"), home=Path("/tmp/switchyard-cmd-x/home"))
SYSTEM = [("usr", None), ("bin", "usr/bin"), ("lib", "usr/lib"), ("etc", None)]


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_the_command_is_one_argument_after_every_fence() -> None:
    nasty = "echo $(id); rm -rf / --no-preserve-root; '\"` --bind / /"
    argv = bwrap_argv(nasty, POLICY, ROOT, MOUNTS, SYSTEM)
    assert argv[-3:] == ["/bin/bash", "-c", nasty] and argv.count(nasty) == 1
    assert argv.index("/usr/bin/setpriv") < argv.index("/usr/bin/prlimit") \
        < argv.index("/usr/bin/bwrap") < len(argv) - 3
    assert argv[-4] == "--"  # bwrap stops reading options before the command


@pytest.mark.parametrize(("host", "drops"), [
    (ROOT, True),  # root never runs a command as root: the sandbox uid, no capabilities
    (WORKER, False),  # an unprivileged worker keeps its uid, in namespaces of its own
])
def test_a_root_worker_drops_to_the_sandbox_uid_first(host: Host, drops: bool) -> None:
    argv = bwrap_argv("true", POLICY, host, MOUNTS, SYSTEM)
    assert ("--reuid=65534" in argv) is drops and ("--bounding-set=-all" in argv) is drops
    assert argv[0] == ("/usr/bin/setpriv" if drops else "/usr/bin/prlimit")
    assert "--data=536870912" in argv and "--core=0" in argv  # rlimits as before


def test_a_root_worker_without_setpriv_is_refused() -> None:
    host = Host(**{**ROOT.__dict__, "setpriv": None})
    with pytest.raises(SandboxUnavailable, match="setpriv"):
        bwrap_argv("true", POLICY, host, MOUNTS, SYSTEM)


def test_the_machines_network_never_and_the_egress_proxy_when_the_policy_allows() -> None:
    offline = bwrap_argv("true", POLICY, ROOT, MOUNTS, SYSTEM)
    for flag in ("--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-net",
                 "--die-with-parent", "--new-session"):
        assert flag in offline
    assert offline[-3:] == ["/bin/bash", "-c", "true"]
    online_mounts = Mounts(**{**MOUNTS.__dict__, "egress": Path("/tmp/switchyard-egress-1")})
    online = bwrap_argv("true", RunPolicy(5, 512, 2000, network=True), ROOT, online_mounts,
                        SYSTEM, bridge="# the bridge")
    # A network namespace of its own all the same: the way out is the proxy's socket, and
    # the command runs once the bridge to it listens
    assert "--unshare-net" in online and "--unshare-pid" in online
    assert ("/tmp/switchyard-egress-1", EGRESS_DIR) in pairs(online, "--ro-bind")
    tail = online[online.index("--", online.index("/usr/bin/bwrap")) + 1:]
    assert tail == ["/bin/bash", "-c", BRIDGE_SCRIPT, "/bin/bash", "# the bridge",
                    f"{EGRESS_DIR}/proxy.sock", "3128", "true"]
    # No proxy to reach: refused, not run with the machine's network
    with pytest.raises(SandboxUnavailable, match="egress proxy"):
        bwrap_argv("true", RunPolicy(5, 512, 2000, network=True), ROOT, MOUNTS, SYSTEM)


def test_the_system_is_read_only_and_the_workspace_the_writable_path() -> None:
    argv = bwrap_argv("true", POLICY, ROOT, MOUNTS, SYSTEM)
    # The checkout is at /workspace in every command, whichever job (an environment set up
    # for the repository names that path)
    assert pairs(argv, "--ro-bind") == [("/usr", "/usr"), ("/etc", "/etc"),
                                        ("/data/ws/job/.git", "/workspace/.git")]
    assert pairs(argv, "--symlink") == [("usr/bin", "/bin"), ("usr/lib", "/lib"),
                                        ("/tmp", "/var/tmp")]
    assert pairs(argv, "--bind") == [("/tmp/switchyard-cmd-x/tmp", "/tmp"),
                                     ("/tmp/switchyard-cmd-x/home", HOME),
                                     ("/data/ws/job", "/workspace")]
    # .git goes read-only over the writable workspace, so after it; the root last of all
    assert argv.index("/data/ws/job/.git") > argv.index("/data/ws/job")
    assert argv[argv.index("--chdir") - 2:argv.index("--chdir")] == ["--remount-ro", "/"]
    assert argv[argv.index("--chdir") + 1] == "/workspace"


def test_a_set_up_environment_is_read_only_but_while_setup_fills_it() -> None:
    env = Mounts(**{**MOUNTS.__dict__, "env": Path("/data/envs/k1"),
                    "node_modules": Path("/data/envs/k1/node/node_modules"),
                    "tools": Path("/venv/bin/uv-dir")})
    argv = bwrap_argv("true", POLICY, ROOT, env, SYSTEM)
    assert ("/data/envs/k1", ENV_DIR) in pairs(argv, "--ro-bind")
    assert ("/data/envs/k1/node/node_modules", "/workspace/node_modules") in pairs(
        argv, "--ro-bind")
    assert argv.index("/workspace/node_modules") > argv.index("/workspace")
    setup = bwrap_argv("true", POLICY, ROOT, Mounts(**{**env.__dict__, "env_writable": True}),
                       SYSTEM)
    assert ("/data/envs/k1", ENV_DIR) in pairs(setup, "--bind")


def test_a_checkout_without_git_binds_only_the_workspace() -> None:
    argv = bwrap_argv("true", POLICY, WORKER, Mounts(**{**MOUNTS.__dict__, "git": None}),
                      SYSTEM)
    assert all(".git" not in a for a in argv)


def test_system_binds_recreate_links_and_bind_directories() -> None:
    assert system_binds([("usr", None), ("lib64", "usr/lib64")]) == [
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib64", "/lib64"]


def test_the_probe_uses_the_same_namespaces_without_the_command() -> None:
    argv = probe_argv(POLICY, ROOT, SYSTEM)
    assert "--reuid=65534" in argv and "--unshare-net" in argv and "--disable-userns" in argv
    assert argv[-3:] == ["/bin/bash", "-c", ":"]


@pytest.mark.parametrize(("mode", "owner", "group", "ok"), [
    (0o711, 0, 0, True),  # workspace_for's parent: passable, not listable
    (0o700, 0, 0, False),  # /root, pytest's tmp dirs: closed to the sandbox user
    (0o1770, 0, 65534, True),  # a checkout's root under a root worker: the group's
    (0o700, 65534, 65534, True),  # the sandbox user's own
    (0o707, 0, 65534, False),  # the group's bits rule for the group, not the others'
])
def test_searchable_follows_owner_then_group_then_others(mode: int, owner: int, group: int,
                                                         ok: bool) -> None:
    assert searchable(mode, owner, group, 65534, 65534) is ok


def test_unpassable_is_none_for_a_path_not_made_yet() -> None:
    assert unpassable(Path("/nonexistent-switchyard/a/b"), 65534, 65534) is None
