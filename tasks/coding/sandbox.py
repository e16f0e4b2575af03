"""`run_command`: the model's shell text run in its workspace, fenced in.

The fence is bubblewrap (tasks.coding.bwrap_fence), for root and unprivileged workers alike:
a mount namespace with the system read-only, a `/tmp` and HOME made for this one command,
the checkout the only other writable path (its .git read-only), no network of the machine's
(a project allowed the network reaches it through the egress proxy alone), a PID namespace
that dies with the command, prlimit's caps, and under a root worker the sandbox uid. Where
bubblewrap cannot run the command is refused, unless the operator opted into the weaker
unshare fence (SWITCHYARD_CODE_SANDBOX_SAME_USER=1), which never gets the network.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tasks.coding import bwrap_fence, unshare_fence
from tasks.coding.bwrap_fence import Host, Mounts, SystemEntries
from tasks.coding.fence import (
    SANDBOX_GID,
    SANDBOX_PATH,
    SANDBOX_UID,
    EnvMounts,
    RunPolicy,
    SandboxUnavailable,
    sandbox_env,
    unpassable,
)
from tasks.coding.output_cap import OutputCap
from tasks.engine import lifecycle
from tasks.engine.errors import JobInterrupt
from tasks.services import egress_proxy
from tasks.settings import get_settings

__all__ = ["SANDBOX_GID", "SANDBOX_PATH", "SANDBOX_UID", "WORKER_GIT_CONFIG", "CommandResult",
           "Host", "OutputCap", "RunPolicy", "SandboxUnavailable", "find_host", "hand_over",
           "prepare_for_sandbox", "problem", "run_command", "sandbox_env"]

# Output past this many times the cap is a flood (`yes`), not a verbose test run: kill it.
FLOOD_FACTOR = 100
# Once the command has exited, how long a process it escaped (setsid) may hold the pipe.
DRAIN_SECONDS = 1.0
# The worker's own git, on a tree a command has written, runs with these: the tree may hold
# a nested repository (planted, or a submodule's checkout) whose config git would otherwise
# execute as the worker (core.fsmonitor, diff.external) when it recurses into it; status
# and diff do that for any gitlink, and `git add -A` turns a planted repository into one.
WORKER_GIT_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                     "-c", "diff.ignoreSubmodules=all", "-c", "submodule.recurse=false",
                     "-c", "status.submoduleSummary=false")
USERNS_HINT = ("bubblewrap needs unprivileged user namespaces: under Docker run the worker "
               "with the seccomp profile deploy/seccomp-bwrap.json, apparmor=unconfined and "
               "systempaths=unconfined (see docker-compose.yml; Docker's default seccomp "
               "profile refuses them); on a host, "
               "`sysctl kernel.unprivileged_userns_clone=1` (Debian) or "
               "`sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04)")


@dataclass
class CommandResult:
    exit_code: int | None  # None: killed by us (timeout or output flood)
    output: str  # stdout and stderr interleaved, capped
    timed_out: bool
    truncated: bool
    seconds: float


def find_host() -> Host:
    bash, prlimit = shutil.which("bash"), shutil.which("prlimit")
    if not bash or not prlimit:
        raise SandboxUnavailable("the sandbox needs bash and prlimit (util-linux) on the worker")
    return Host(as_root=os.geteuid() == 0, bash=bash, prlimit=prlimit,
                bwrap=shutil.which("bwrap"), setpriv=shutil.which("setpriv"),
                unshare=shutil.which("unshare"))


def system_entries(root: Path = Path("/")) -> SystemEntries:
    """The system directories this machine has, each a link or a directory."""
    found: SystemEntries = []
    for name in bwrap_fence.SYSTEM_DIRS:
        path = root / name
        if path.is_symlink():
            found.append((name, os.readlink(path)))
        elif path.is_dir():
            found.append((name, None))
    return found


BRIDGE_SOURCE = Path(__file__).with_name("proxy_bridge.py")


_PROBED_OK: set[tuple[str, ...]] = set()  # a success holds for the worker's life; a failure
# may be passing (a process limit), so it is asked again next time


def forget_probes() -> None:
    """Ask the machine again (tests that change what it has)."""
    _PROBED_OK.clear()
    unshare_fence._PROBED_OK.clear()


def bwrap_problem(policy: RunPolicy, host: Host) -> str | None:
    """Why bubblewrap cannot make this policy's sandbox here, or None when it can."""
    if host.bwrap is None:
        return "bubblewrap is not installed (the coding agent's commands run in its sandbox)"
    argv = tuple(bwrap_fence.probe_argv(policy, host, system_entries()))
    if argv in _PROBED_OK:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              env={"PATH": SANDBOX_PATH}, cwd="/", check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not run ({exc})"
    if done.returncode != 0:
        said = done.stderr.strip() or f"exit {done.returncode}"
        return f"bubblewrap cannot make a user namespace here ({said}): {USERNS_HINT}"
    _PROBED_OK.add(argv)
    return None


def choose_fence(policy: RunPolicy, host: Host) -> str:
    """'bwrap', or 'unshare' where the operator accepted the weaker fence; else refuse."""
    why = bwrap_problem(policy, host)
    if why is None:
        return "bwrap"
    if not get_settings().code_sandbox_same_user:
        raise SandboxUnavailable(f"{why}; refusing to run the command unfenced "
                                 "(SWITCHYARD_CODE_SANDBOX_SAME_USER=1 accepts the weaker "
                                 "unshare fence, which shares /tmp between commands)")
    if policy.network:
        raise SandboxUnavailable(f"{why}; a command allowed the network runs only under "
                                 "bubblewrap, whose network goes through the egress guard")
    unshare_fence.namespaces_for(policy, host)  # refuses when even that cannot be made
    return "unshare"


def run_command(cwd: Path, command: str, policy: RunPolicy) -> CommandResult:
    """Run `bash -c command` in cwd behind the fences; never longer than the policy allows."""
    host = find_host()
    fence = choose_fence(policy, host)
    env_mounts = policy.env
    if env_mounts is not None and fence != "bwrap":
        raise SandboxUnavailable("a set-up environment is mounted by bubblewrap alone")
    workspace = Path(os.path.abspath(cwd))
    with _command_dirs(policy, host.as_root) as (home, tmp):
        if fence == "bwrap":
            argv = bwrap_fence.bwrap_argv(
                command, policy, host, _mounts(workspace, home, tmp, policy, host, env_mounts),
                system_entries(), BRIDGE_SOURCE.read_text() if policy.network else None)
            env = sandbox_env(Path(bwrap_fence.HOME), Path("/tmp"))
            if policy.network:
                env.update(bwrap_fence.proxy_env())
            if env_mounts is not None:
                env.update(env_mounts.variables)
        else:
            argv = unshare_fence.sandbox_argv(command, policy, host,
                                              unshare_fence.namespaces_for(policy, host))
            env = sandbox_env(home)
        return _run(argv, workspace, env, policy)


def _mounts(workspace: Path, home: Path, tmp: Path, policy: RunPolicy, host: Host,
            env_mounts: EnvMounts | None = None) -> Mounts:
    if host.as_root:
        blocked = unpassable(workspace, policy.uid, policy.gid)
        if blocked is not None:
            raise SandboxUnavailable(f"the sandbox user (uid {policy.uid}) cannot pass through "
                                     f"{blocked} to the checkout {workspace}: make it passable "
                                     f"(chmod o+x {blocked})")
    git = workspace / ".git"
    if git.is_symlink():  # bound read-only by name: a link would protect its target instead
        raise SandboxUnavailable(f"{git} is a symbolic link: refusing to run commands there")
    e = env_mounts
    caches = []
    for name in e.node_caches if e and e.node_modules else ():
        own = tmp.parent / f"node{name}"  # beside this command's HOME and /tmp, gone with them
        own.mkdir(mode=0o700)
        if host.as_root:
            hand_over([own], policy)
        caches.append((own, name))
    return Mounts(workspace=workspace, git=git if git.exists() else None, tmp=tmp, home=home,
                  egress=egress_proxy.socket_dir(policy.egress) if policy.network else None,
                  env=e.root if e else None, env_writable=bool(e and e.writable),
                  node_modules=e.node_modules if e else None, node_caches=tuple(caches),
                  tools=e.tools if e else None)


def _run(argv: list[str], cwd: Path, env: dict[str, str], policy: RunPolicy) -> CommandResult:
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    cap = OutputCap(policy.output_chars)
    try:
        ending = _pump(proc, cap, started + policy.timeout_seconds,
                       policy.output_chars * FLOOD_FACTOR)
        if isinstance(ending, JobInterrupt):
            # Canceled or lost while the command ran: the step ends now, not at the
            # command's end (a test suite, a build may take many minutes).
            raise ending
    finally:
        # Whatever ended the command, nothing it started survives: under bubblewrap killing
        # it kills the PID namespace's init (--die-with-parent), and with it the namespace.
        _kill_group(proc.pid)
        assert proc.stdout is not None
        proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    output = cap.text()
    if ending == "flood":
        output += (f"\n[the command was killed: it wrote more than "
                   f"{policy.output_chars * FLOOD_FACTOR} characters]")
    return CommandResult(exit_code=proc.returncode if ending == "exited" else None,
                         output=output, timed_out=ending == "timeout",
                         truncated=cap.truncated, seconds=round(time.monotonic() - started, 3))


def _pump(proc: subprocess.Popen[bytes], cap: OutputCap, deadline: float,
          flood: int) -> str | JobInterrupt:
    """Read the combined output until EOF: 'exited', 'timeout' or 'flood', or why the job's
    run must stop (its heartbeat found it canceled or no longer its own)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            return "timeout"
        if (stop := lifecycle.interrupted()) is not None:
            return stop
        if exited_at is None and proc.poll() is not None:
            exited_at = now
            _kill_group(proc.pid)  # a background child must not hold the pipe open
        if exited_at is not None and now - exited_at > DRAIN_SECONDS:
            return "exited"
        ready, _, _ = select.select([fd], [], [], min(0.1, deadline - now))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:  # the pipe is closed, but the command may live on (`exec >&-`)
            cap.feed(decoder.decode(b"", final=True))
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return "timeout"
            return "exited"
        cap.feed(decoder.decode(chunk))
        if cap.total > flood:
            return "flood"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@contextlib.contextmanager
def _command_dirs(policy: RunPolicy, as_root: bool) -> Iterator[tuple[Path, Path]]:
    """A HOME and a /tmp for this command alone, removed after it: what one command leaves
    there (a `.pth`, a `~/.gitconfig`, a socket) no other command ever sees."""
    base = Path(tempfile.mkdtemp(prefix="switchyard-cmd-"))
    try:
        base.chmod(0o711)  # bubblewrap, as the sandbox user, opens the two below by name
        home, tmp = base / "home", base / "tmp"
        home.mkdir(mode=0o700)
        tmp.mkdir(mode=0o700)
        # The tree's .git belongs to the worker, not to the sandbox user: without this, git
        # in the sandbox could refuse the repository ("dubious ownership").
        (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
        if as_root:
            hand_over([home, tmp, home / ".gitconfig"], policy)
        yield home, tmp
    finally:
        _remove(base)


def _remove(base: Path) -> None:
    """rmtree, after giving back the search and write bits a command may have taken from
    its own directories (chmod 000), which would leave them behind for a non-root worker."""
    for dirpath, dirnames, _ in os.walk(base):
        for name in dirnames:
            with contextlib.suppress(OSError):
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o700)
    shutil.rmtree(base, ignore_errors=True)


def hand_over(paths: Iterable[Path], policy: RunPolicy) -> None:
    """Give paths the worker created to the sandbox user, so commands can change them."""
    if os.geteuid() != 0:
        return
    for path in paths:
        os.lchown(path, policy.uid, policy.gid)


def prepare_for_sandbox(root: Path, uid: int = SANDBOX_UID, gid: int = SANDBOX_GID) -> None:
    """Make a checkout workable for the sandbox user while .git stays the worker's.

    Everything but .git goes to uid:gid. The root directory stays root's, group-writable
    for gid and sticky: commands can create and remove their own entries at the top but
    cannot rename or replace .git, whose hooks and config would run as root when the worker
    commits. Because the root and .git stay root's, the worker's own git needs no
    `safe.directory` (a tree chowned whole to the sandbox user would need
    `git -c safe.directory=*`). Ownership does not guard nested repositories (git enters
    a submodule with GIT_DIR set, skipping its ownership check): the worker's git must
    pass WORKER_GIT_CONFIG, and should not commit `workspace.nested_repositories`. Call
    again after the worker writes into the tree (clone, restore). A no-op when the worker
    is not root (commands then run as the worker).
    """
    if os.geteuid() != 0:
        return
    os.chown(root, 0, gid)
    root.chmod(0o1770)
    for dirpath, dirnames, filenames in os.walk(root):  # never follows symlinks
        if Path(dirpath) == root:
            dirnames[:] = [d for d in dirnames if d != ".git"]
            filenames = [f for f in filenames if f != ".git"]  # a worktree's .git file
        for name in (*dirnames, *filenames):
            os.lchown(os.path.join(dirpath, name), uid, gid)


def problem() -> str | None:
    """Why this worker cannot fence the coding agent's commands, or None when it can."""
    try:
        host = find_host()
        policy = RunPolicy.from_settings()
        if choose_fence(policy, host) == "bwrap" and host.as_root:
            workspaces = get_settings().workspaces_dir
            blocked = unpassable(workspaces, policy.uid, policy.gid)
            if blocked is not None:
                return (f"the sandbox user (uid {policy.uid}) cannot pass through {blocked} "
                        f"to the checkouts in {workspaces}: chmod o+x {blocked}")
    except SandboxUnavailable as exc:
        return str(exc)
    return None


def fence_in_use() -> str:
    """Which fence commands get here, for doctor: bubblewrap, or the weaker opt-in."""
    try:
        fence = choose_fence(RunPolicy.from_settings(), find_host())
    except SandboxUnavailable as exc:
        return str(exc)
    if fence == "bwrap":
        return "bubblewrap makes the fence (user namespaces work)"
    return ("the weaker unshare fence (SWITCHYARD_CODE_SANDBOX_SAME_USER=1; commands share "
            "/tmp): install bubblewrap")
