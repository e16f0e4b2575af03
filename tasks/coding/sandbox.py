"""`run_command`: the model's shell text run in its workspace, fenced in.

Fences, each a plain util-linux tool in front of `bash -c` (no preexec_fn: the worker runs
threads): `unshare` gives a new network namespace (no network, not even the loopback where
PostgreSQL and Redis listen) and a new PID namespace (everything the command starts dies with
it); `prlimit` caps memory, processes, file size and core dumps; `setpriv` drops a root
worker to an unprivileged uid (an unprivileged worker gets the namespaces through a user
namespace instead). The environment is an allow-list, the clock and the output are capped.
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

from tasks.engine.errors import PermanentError
from tasks.settings import get_settings

SANDBOX_UID = SANDBOX_GID = 65534  # nobody / nogroup
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Output past this many times the cap is a flood (`yes`), not a verbose test run: kill it.
FLOOD_FACTOR = 100
# Once the command has exited, how long a process it escaped (setsid) may hold the pipe.
DRAIN_SECONDS = 1.0
# PID 1 of a namespace ignores the signals it has no handler for (`kill $$` would do
# nothing), so the command runs as its child; `exit $?` keeps bash from exec'ing it.
INIT_SCRIPT = '"$0" -c "$1"; exit $?'
# The worker's own git, on a tree a command has written, runs with these: the tree may hold
# a nested repository (planted, or a submodule's checkout) whose config git would otherwise
# execute as the worker (core.fsmonitor, diff.external) when it recurses into it; status
# and diff do that for any gitlink, and `git add -A` turns a planted repository into one.
WORKER_GIT_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                     "-c", "diff.ignoreSubmodules=all", "-c", "submodule.recurse=false",
                     "-c", "status.submoduleSummary=false")


class SandboxUnavailable(PermanentError):
    """This machine cannot fence a command as asked: refuse rather than run it unfenced."""


@dataclass
class RunPolicy:
    timeout_seconds: float
    memory_mb: int
    output_chars: int
    network: bool = False
    max_processes: int = 512  # RLIMIT_NPROC: counts threads too, per uid
    max_file_mb: int = 1024  # RLIMIT_FSIZE: one file, not the disk
    uid: int = SANDBOX_UID  # used when the worker runs as root
    gid: int = SANDBOX_GID

    @classmethod
    def from_settings(cls, network: bool = False) -> RunPolicy:
        s = get_settings()
        return cls(timeout_seconds=s.code_run_timeout_seconds, memory_mb=s.code_run_memory_mb,
                   output_chars=s.code_run_output_chars, network=network)


@dataclass
class CommandResult:
    exit_code: int | None  # None: killed by us (timeout or output flood)
    output: str  # stdout and stderr interleaved, capped
    timed_out: bool
    truncated: bool
    seconds: float


@dataclass(frozen=True)
class Host:
    """The programs the fences are made of on this machine."""

    as_root: bool
    bash: str
    prlimit: str
    unshare: str | None
    setpriv: str | None


class OutputCap:
    """Keeps the head (40 %) and tail (50 %) of a stream in bounded memory."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head_max = limit * 4 // 10
        self.tail_max = limit * 5 // 10
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, text: str) -> None:
        self.total += len(text)
        if len(self.head) < self.head_max:
            room = self.head_max - len(self.head)
            self.head, text = self.head + text[:room], text[room:]
        self.tail += text
        if len(self.tail) > 2 * self.tail_max:  # trim in batches, not on every chunk
            self.tail = self.tail[-self.tail_max:]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        # NUL cannot be stored (a JSON step output, a text column): shown as \0.
        return self._text().replace("\x00", "\\0")

    def _text(self) -> str:
        if not self.truncated:
            return self.head + self.tail
        tail = self.tail[-self.tail_max:] if self.tail_max else ""
        cut = self.total - len(self.head) - len(tail)
        return f"{self.head}\n[... {cut} characters cut ...]\n{tail}"


def find_host() -> Host:
    bash, prlimit = shutil.which("bash"), shutil.which("prlimit")
    if not bash or not prlimit:
        raise SandboxUnavailable("the sandbox needs bash and prlimit (util-linux) on the worker")
    if os.geteuid() != 0 and not get_settings().code_sandbox_same_user:
        # As the worker's own user a command could rewrite the job's git directory (a
        # clean filter, a push URL) and so act as the worker outside the fence.
        raise SandboxUnavailable("the coding agent's commands need a root worker (to run them "
                                 "as an unprivileged user); SWITCHYARD_CODE_SANDBOX_SAME_USER=1 "
                                 "accepts the weaker fence")
    return Host(as_root=os.geteuid() == 0, bash=bash, prlimit=prlimit,
                unshare=shutil.which("unshare"), setpriv=shutil.which("setpriv"))


def sandbox_env(home: Path) -> dict[str, str]:
    """The whole environment a command sees: nothing of the worker's (DATABASE_URL, keys)."""
    return {"PATH": SANDBOX_PATH, "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8",
            "TERM": "dumb", "CI": "true", "PYTHONDONTWRITEBYTECODE": "1"}


def namespace_flags(policy: RunPolicy, as_root: bool) -> list[list[str]]:
    """unshare's flags, the best first: the first this machine accepts is used."""
    flags = [] if policy.network else ["--net"]
    flags += ["--pid", "--fork", "--kill-child", "--mount-proc"]
    if as_root:
        return [flags]
    # Unprivileged, namespaces need a user namespace of their own: the worker's uid mapped
    # to itself (util-linux 2.38+), else to root inside it.
    return [["--user", "--map-current-user", *flags], ["--user", "--map-root-user", *flags]]


def sandbox_argv(command: str, policy: RunPolicy, host: Host, namespaces: list[str]) -> list[str]:
    """The argv that runs `command` behind every fence (the command is one argument)."""
    mb = 1024 * 1024
    limits = [host.prlimit, f"--as={policy.memory_mb * mb}", f"--nproc={policy.max_processes}",
              f"--fsize={policy.max_file_mb * mb}", "--core=0", "--"]
    user: list[str] = []
    if host.as_root:
        if not host.setpriv:
            raise SandboxUnavailable("the worker runs as root and setpriv (util-linux) is "
                                     "missing: refusing to run commands as root")
        user = [host.setpriv, f"--reuid={policy.uid}", f"--regid={policy.gid}",
                "--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
                "--"]
    elif host.setpriv:
        user = [host.setpriv, "--no-new-privs", "--"]
    shell = ([host.bash, "-c", INIT_SCRIPT, host.bash, command] if namespaces
             else [host.bash, "-c", command])
    return [*namespaces, *limits, *user, *shell]


_PROBED_OK: set[tuple[str, ...]] = set()  # a success holds for the worker's life; a failure
# may have been passing (a process limit), so it is asked again next time


def _probe(prefix: tuple[str, ...], bash: str) -> str:
    """'' when this machine can create these namespaces, else why not."""
    if prefix in _PROBED_OK:
        return ""
    try:
        done = subprocess.run([*prefix, bash, "-c", ":"], capture_output=True, text=True,
                              timeout=30, env={"PATH": SANDBOX_PATH}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return done.stderr.strip() or f"exit {done.returncode}"
    _PROBED_OK.add(prefix)
    return ""


def namespaces_for(policy: RunPolicy, host: Host) -> list[str]:
    """unshare's argv prefix, [] when the policy allows running without; else refuse."""
    if host.unshare is None:
        if policy.network:
            return []
        raise SandboxUnavailable("unshare (util-linux) is not installed: refusing to run a "
                                 "command with network access it must not have")
    why = ""
    for flags in namespace_flags(policy, host.as_root):
        prefix = [host.unshare, *flags, "--"]
        why = _probe(tuple(prefix), host.bash)
        if not why:
            return prefix
    if policy.network:
        return []  # the process group still ends what the command starts
    raise SandboxUnavailable(f"cannot create a network namespace ({why}): refusing to run "
                             "a command with network access it must not have")


def run_command(cwd: Path, command: str, policy: RunPolicy) -> CommandResult:
    """Run `bash -c command` in cwd behind the fences; never longer than the policy allows."""
    host = find_host()
    argv = sandbox_argv(command, policy, host, namespaces_for(policy, host))
    started = time.monotonic()
    with _sandbox_home(policy, host.as_root) as home:
        proc = subprocess.Popen(argv, cwd=cwd, env=sandbox_env(home), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        cap = OutputCap(policy.output_chars)
        try:
            ending = _pump(proc, cap, started + policy.timeout_seconds,
                           policy.output_chars * FLOOD_FACTOR)
        finally:
            _kill_group(proc.pid)  # whatever ended the command, nothing it started survives
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
          flood: int) -> str:
    """Read the combined output until EOF: 'exited', 'timeout' or 'flood'."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if now >= deadline:
            return "timeout"
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
def _sandbox_home(policy: RunPolicy, as_root: bool) -> Iterator[Path]:
    """A throwaway HOME (and TMPDIR): caches and dotfiles stay out of the workspace."""
    home = Path(tempfile.mkdtemp(prefix="switchyard-home-"))
    try:
        # The tree's .git belongs to the worker, not to the sandbox user: without this, git
        # in the sandbox would refuse the repository ("dubious ownership").
        (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
        if as_root:
            hand_over([home, home / ".gitconfig"], policy)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


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
        namespaces_for(RunPolicy.from_settings(), host)
    except SandboxUnavailable as exc:
        return str(exc)
    return None
