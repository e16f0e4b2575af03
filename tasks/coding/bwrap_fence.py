"""The bubblewrap fence's argv, as pure functions of the policy and the paths.

A command gets a mount namespace of its own in which the system directories are read-only,
`/tmp` and HOME are directories made for this command alone, the checkout is the only other
writable path and its `.git` is bound read-only over it; a new network namespace (only a
loopback of its own) always — a policy that allows the network gets the worker's egress
proxy there (tasks.services.egress_proxy, through tasks/coding/proxy_bridge.py) and nothing
else — and a PID namespace whose init is bubblewrap's: when the command ends, everything it
started ends. A root worker first
drops to the sandbox uid (setpriv), so the user namespace maps that uid and no file of
root's is the command's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.coding.fence import RunPolicy, SandboxUnavailable

HOME = "/home/sandbox"  # the same path in every command; a different directory under it
# The top-level directories a command may read. Nothing else of the machine is there: not
# /home, /root, /var, /srv or the data dir, so no other tenant's checkout, no worker's file.
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt")
MB = 1024 * 1024


@dataclass(frozen=True)
class Host:
    """The programs the fences are made of on this machine."""

    as_root: bool
    bash: str
    prlimit: str
    bwrap: str | None
    setpriv: str | None
    unshare: str | None


@dataclass(frozen=True)
class Mounts:
    """The host directories one command gets."""

    workspace: Path  # bound read-write at its own path
    git: Path | None  # the checkout's .git, bound read-only over the workspace's
    tmp: Path  # bound at /tmp
    home: Path  # bound at HOME
    egress: Path | None = None  # the egress proxy's socket directory (network allowed)
    env: Path | None = None  # the repository's set-up environment, bound at ENV_DIR
    env_writable: bool = False  # only while the setup phase fills it
    node_modules: Path | None = None  # the environment's, bound over the checkout's
    node_caches: tuple[tuple[Path, str], ...] = ()  # (the command's own dir, name in it)
    tools: Path | None = None  # the worker's installer binaries (uv), bound at TOOLS_DIR


# (name, symlink target or None) for each of SYSTEM_DIRS present on the machine: a merged-/usr
# system's /bin is a link to usr/bin, and must stay one inside.
SystemEntries = list[tuple[str, str | None]]


def drop_user(policy: RunPolicy, host: Host) -> list[str]:
    """setpriv's argv when the worker is root: the command never holds root's uid, so the
    worker's files (mode 0600, root's) stay closed to it. An unprivileged worker keeps its
    uid, inside a mount namespace that shows none of its files."""
    if not host.as_root:
        return []
    if not host.setpriv:
        raise SandboxUnavailable("the worker runs as root and setpriv (util-linux) is "
                                 "missing: refusing to run commands as root")
    return [host.setpriv, f"--reuid={policy.uid}", f"--regid={policy.gid}", "--clear-groups",
            "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]


def limits(policy: RunPolicy, host: Host) -> list[str]:
    # RLIMIT_DATA, not RLIMIT_AS: memory written to counts, address space merely reserved
    # does not. WebAssembly reserves gigabytes of guard pages it never touches, and under
    # --as node could not instantiate a module (vitest, esbuild's wasm build hung or died).
    return [host.prlimit, f"--data={policy.memory_mb * MB}", f"--nproc={policy.max_processes}",
            f"--fsize={policy.max_file_mb * MB}", "--core=0", "--"]


def namespaces() -> list[str]:
    """bubblewrap's namespace flags. --disable-userns: a nested user namespace would give
    the command capabilities over mounts it made itself (the kernel keeps ours locked, but
    it is one less door). --die-with-parent: the worker killing bubblewrap (timeout, flood)
    kills the namespace's init, and with it every process in it. Never the machine's
    network: a command allowed the network reaches it through the egress proxy alone."""
    return ["--unshare-user", "--disable-userns", "--unshare-net", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
            "--new-session"]


def system_binds(entries: SystemEntries) -> list[str]:
    """The read-only system: each directory bound, each link recreated."""
    argv: list[str] = []
    for name, link in entries:
        argv += ["--symlink", link, f"/{name}"] if link else ["--ro-bind", f"/{name}", f"/{name}"]
    return argv


def filesystem(policy: RunPolicy, mounts: Mounts) -> list[str]:
    """Devices, a /proc of the new PID namespace, the command's own /tmp and HOME, the
    checkout; then the root itself read-only (bubblewrap's root is a tmpfs: memory)."""
    argv = ["--dev", "/dev", "--perms", "1777", "--size", str(policy.memory_mb * MB),
            "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--proc", "/proc",
            "--bind", str(mounts.tmp), "/tmp", "--symlink", "/tmp", "/var/tmp",
            "--bind", str(mounts.home), HOME, "--bind", str(mounts.workspace), WORKSPACE]
    if mounts.git is not None:
        argv += ["--ro-bind", str(mounts.git), f"{WORKSPACE}/.git"]
    if mounts.egress is not None:  # read-only: connecting works, replacing the socket not
        argv += ["--ro-bind", str(mounts.egress), EGRESS_DIR]
    if mounts.env is not None:
        argv += ["--bind" if mounts.env_writable else "--ro-bind", str(mounts.env), ENV_DIR]
    if mounts.node_modules is not None:
        argv += ["--ro-bind", str(mounts.node_modules), f"{WORKSPACE}/node_modules"]
        for own, name in mounts.node_caches:
            argv += ["--bind", str(own), f"{WORKSPACE}/node_modules/{name}"]
    if mounts.tools is not None:
        argv += ["--ro-bind", str(mounts.tools), TOOLS_DIR]
    return [*argv, "--remount-ro", "/", "--chdir", WORKSPACE]


# Every command sees its checkout at the same path, whichever job it is: an environment set
# up for the repository (a virtualenv's scripts, an editable install) names it, and is
# reused by the next task on the same repository (tasks.coding.environments).
WORKSPACE = "/workspace"
ENV_DIR = "/run/switchyard-env"
TOOLS_DIR = "/run/switchyard-tools"


EGRESS_DIR = "/run/switchyard-egress"  # where the proxy's socket directory is bound
PROXY_PORT = 3128  # the bridge's port on the sandbox's own loopback
# Start the bridge, then become the command; a bridge that cannot start is the command's
# failure, said in its output.
BRIDGE_SCRIPT = ('python3 -c "$1" "$2" "$3" || { echo "the network proxy could not start in '
                 'the sandbox (python3 is needed)" >&2; exit 97; }; exec "$0" -c "$4"')


def proxy_env() -> dict[str, str]:
    """What points package managers, git and curl at the bridge (all read these)."""
    url = f"http://127.0.0.1:{PROXY_PORT}"
    local = "localhost,127.0.0.1,::1"  # a test suite's own servers stay direct
    return {**{name: url for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                                      "npm_config_proxy", "npm_config_https_proxy")},
            "no_proxy": local, "NO_PROXY": local}


def bwrap_argv(command: str, policy: RunPolicy, host: Host, mounts: Mounts,
               system: SystemEntries, bridge: str | None = None) -> list[str]:
    """The argv that runs `command` behind every fence (the command is one argument);
    `bridge`, the proxy bridge's source, where the policy allows the network."""
    assert host.bwrap is not None
    shell = [host.bash, "-c", command]
    if policy.network:
        if bridge is None or mounts.egress is None:
            raise SandboxUnavailable("a command allowed the network needs the egress proxy")
        shell = [host.bash, "-c", BRIDGE_SCRIPT, host.bash, bridge,
                 f"{EGRESS_DIR}/proxy.sock", str(PROXY_PORT), command]
    return [*drop_user(policy, host), *limits(policy, host), host.bwrap, *namespaces(),
            *system_binds(system), *filesystem(policy, mounts), "--", *shell]


def probe_argv(policy: RunPolicy, host: Host, system: SystemEntries) -> list[str]:
    """A command that does nothing behind the same namespaces and system view: whether this
    machine lets bubblewrap make them (seccomp, sysctl, AppArmor may each refuse)."""
    assert host.bwrap is not None
    return [*drop_user(policy, host), host.bwrap, *namespaces(),
            *system_binds(system), "--dev", "/dev", "--proc", "/proc", "--remount-ro", "/",
            "--", host.bash, "-c", ":"]
