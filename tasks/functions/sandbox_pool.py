"""Child processes for the JS sandbox: how one is fenced and started, and a warm pool.

A child is `python -I -c <sandbox_child.py>` started behind these fences, each a plain
util-linux tool in front of it (no preexec_fn: the Celery worker runs threads):

- bubblewrap: a mount namespace of its own in which the system and the interpreter are
  read-only and nothing else is there (no data dir, no home, no /proc, no writable path), a
  network namespace with no interface but a loopback, a PID namespace, no nested user
  namespaces, a new session;
- `setpriv`: a root worker's child runs as nobody (65534), no new privileges, no
  capabilities, no supplementary groups;
- an empty environment (nothing of the worker's: DATABASE_URL, SWITCHYARD_SECRET_KEY),
  an empty read-only working directory, no inherited descriptor but its three pipes;
- the child itself, once warm and before any user code: RLIMIT_NOFILE 8, RLIMIT_FSIZE 0,
  RLIMIT_NPROC 0, RLIMIT_CORE 0, descriptors above 2 closed; at its run RLIMIT_AS and
  RLIMIT_CPU (hard), and QuickJS's own memory limit.

Where those fences cannot be made (bubblewrap missing, user namespaces refused) no child is
started: function.run fails naming what is missing, and `switchyard doctor` says so. Only
an operator's explicit SWITCHYARD_FUNCTION_FENCES=weak accepts less: `unshare --net` and
setpriv where they work, else no namespace at all, with QuickJS's lack of any I/O API as the
remaining fence (a warning is logged once).

The pool keeps `size` children warm (imported, prelude evaluated, waiting on stdin); each
serves ONE run and exits, so nothing leaks from one run to the next. A background thread
refills it. It belongs to the process that made it: after a fork (Celery's prefork pool)
the child process gets a fresh, empty pool and never touches its parent's children.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tasks.engine.errors import PermanentError
from tasks.settings import get_settings

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
CHILD_UID = CHILD_GID = 65534  # nobody / nogroup
START_TIMEOUT = 30.0  # a cold start on a loaded 2-core machine; normally ~50 ms


class SandboxUnavailable(PermanentError):
    """No child could be started (python or quickjs unreadable, namespaces refused...):
    retrying cannot help, the operator must install or allow what is missing. A save, which
    checks the code in the sandbox, answers 503 with the message (it says what to do)."""

    http_status, code = 503, "sandbox_unavailable"


@dataclass(frozen=True)
class Fences:
    prefix: tuple[str, ...]  # argv in front of python
    network_namespace: bool
    unprivileged_uid: bool
    python: str = sys.executable  # the interpreter the child runs
    path: tuple[str, ...] = ()  # where it finds quickjs-ng, when not in its own site-packages



_fences: Fences | None = None
_fences_lock = threading.Lock()


def _works(prefix: list[str], python: str = sys.executable, path: tuple[str, ...] = ()) -> bool:
    probe = "import sys; sys.path[:0] = sys.argv[1:2]; import quickjs"
    try:
        done = subprocess.run([*prefix, python, "-I", "-c", probe, *path],
                              env={}, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
WEAK_HINT = ("SWITCHYARD_FUNCTION_FENCES=weak accepts weaker fences (unshare and setpriv "
             "where they work, else none: documented as such)")


RUNTIME_DIR = "/run/switchyard-js"  # where the copy of quickjs-ng is bound


def system_python() -> str | None:
    """The interpreter a sandboxed child runs: the worker's own where it is part of the
    system, else the system's python3 (a virtualenv's may sit where nobody can pass)."""
    own = os.path.realpath(sys.executable)
    if own.startswith("/usr/"):
        return own
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else None


def runtime_copy() -> Path:
    """quickjs-ng's files, copied once per version beside the data (which the sandbox user
    can pass through, unlike wherever the worker's virtualenv lives), read-only."""
    import importlib.metadata
    import importlib.util

    spec, package = importlib.util.find_spec("_quickjs"), importlib.util.find_spec("quickjs")
    if spec is None or spec.origin is None or package is None \
            or not package.submodule_search_locations:
        raise SandboxUnavailable("the quickjs-ng package is not installed (pip install -e .)")
    version = importlib.metadata.version("quickjs-ng")
    target = get_settings().data_dir / "js-runtime" / version
    if not (target / "quickjs" / "__init__.py").is_file():
        partial = target.with_name(f"{version}.{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(package.submodule_search_locations[0], partial / "quickjs",
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(spec.origin, partial / Path(spec.origin).name)
        for base, _, files in os.walk(partial):
            os.chmod(base, 0o755)
            for name in files:
                os.chmod(os.path.join(base, name), 0o644)
        for parent in (target.parent, target.parent.parent):
            parent.mkdir(parents=True, exist_ok=True)
        os.chmod(target.parent, 0o755)
        try:
            partial.rename(target)
        except OSError:  # another process made it first
            shutil.rmtree(partial, ignore_errors=True)
    return target


def bwrap_argv(bwrap: str, drop: list[str], runtime: Path) -> list[str]:
    """bubblewrap in front of the child's python: the system read-only, quickjs-ng's copy
    read-only, nothing else of the machine, every namespace of its own."""
    binds: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path("/") / name
        if path.is_symlink():
            binds += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            binds += ["--ro-bind", str(path), f"/{name}"]
    return [*drop, bwrap, "--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--die-with-parent",
            "--new-session", *binds, "--ro-bind", str(runtime), RUNTIME_DIR,
            "--dev", "/dev", "--proc", "/proc", "--chdir", "/", "--remount-ro", "/", "--",
            # bubblewrap sets PWD at exec: nothing of any environment reaches the child
            "/usr/bin/env", "-i"]


def fences() -> Fences:
    """The fences this machine gives, probed once per process: bubblewrap's, or a refusal
    (unless the operator accepted weaker ones)."""
    global _fences
    with _fences_lock:
        if _fences is not None:
            return _fences
        unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
        bwrap = shutil.which("bwrap")
        root = os.geteuid() == 0
        drop: list[str] = []
        if root and setpriv:
            drop = [setpriv, f"--reuid={CHILD_UID}", f"--regid={CHILD_GID}", "--clear-groups",
                    "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
        elif setpriv:
            drop = [setpriv, "--no-new-privs", "--"]
        python = system_python()
        if bwrap and python and (drop or not root):
            prefix = bwrap_argv(bwrap, drop, runtime_copy())
            if _works(prefix, python, (RUNTIME_DIR,)):
                _fences = Fences(tuple(prefix), True, root, python, (RUNTIME_DIR,))
                return _fences
        why = ("bubblewrap is not installed (apt-get install -y bubblewrap)" if not bwrap
               else "no system python3 for the sandbox (apt-get install -y python3)"
               if not python
               else "setpriv (util-linux) is missing: a root worker's child must not run as "
               "root" if root and not drop
               else f"bubblewrap cannot make the sandbox here (user namespaces refused, or uid "
               f"{CHILD_UID} cannot pass through the data dir to quickjs-ng's copy)")
        if get_settings().function_fences != "weak":
            raise SandboxUnavailable(f"the JS sandbox's fences cannot be made: {why}; "
                                     f"{WEAK_HINT}")
        log.warning("JS sandbox: %s; SWITCHYARD_FUNCTION_FENCES=weak: trying weaker fences",
                    why)
        candidates: list[tuple[list[str], bool]] = []
        if unshare:
            if root:
                candidates.append(([unshare, "--net", "--"], True))
            else:
                candidates.append(([unshare, "--user", "--map-current-user", "--net", "--"], True))
                candidates.append(([unshare, "--user", "--map-root-user", "--net", "--"], True))
        candidates.append(([], False))
        # A root worker's child never runs as root, unless the operator accepts it (the
        # interpreter or quickjs where nobody can read them).
        users = [drop] if drop else []
        if not root or get_settings().function_sandbox_same_user:
            users.append([])
        for ns, has_net in candidates:
            for user in users:
                if _works([*ns, *user]):
                    _fences = Fences(tuple(ns + user), has_net, root and bool(user))
                    if not has_net or (root and not user):
                        log.warning("JS sandbox: weaker fences on this machine (network "
                                    "namespace: %s, unprivileged uid: %s)", has_net,
                                    _fences.unprivileged_uid)
                    return _fences
        raise SandboxUnavailable(
            "cannot start the JS sandbox's child process"
            + (f" as uid {CHILD_UID}: can it read the Python interpreter and the quickjs "
               "package? (SWITCHYARD_FUNCTION_SANDBOX_SAME_USER=1 accepts running it as "
               "root, a weaker fence)" if root else ": is the quickjs package installed?"))


_empty_dir: str | None = None


def empty_dir() -> str:
    """A directory with nothing in it that nobody may write: the children's cwd."""
    global _empty_dir
    if _empty_dir is None or not os.path.isdir(_empty_dir):
        path = tempfile.mkdtemp(prefix="switchyard-js-")
        os.chmod(path, 0o555)
        _empty_dir = path
    return _empty_dir


# Read once per process, at the first start: every run starts a child, and the files are
# part of the code this process runs, like its own modules.
@functools.cache
def child_source() -> str:
    return (HERE / "sandbox_child.py").read_text()


@functools.cache
def prelude_source() -> str:
    return (HERE / "prelude.js").read_text()


class Child:
    """One started child process and its two pipes; the parent side of the protocol."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        self.pid = proc.pid
        self._runner: int | None = None
        self.owner = os.getpid()
        self._buf = b""
        assert proc.stdout is not None and proc.stdin is not None
        self._out = proc.stdout.fileno()
        self._in = proc.stdin

    def send(self, data: bytes) -> None:
        self._in.write(data + b"\n")
        self._in.flush()

    def read_line(self, deadline: float, max_bytes: int) -> bytes | None:
        """The next line; None at EOF. Raises TimeoutError past the deadline,
        OverflowError if the line grows past max_bytes."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1:]
                if len(line) > max_bytes:
                    raise OverflowError(len(line))
                return line
            if len(self._buf) > max_bytes:
                raise OverflowError(len(self._buf))
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._out], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                return None
            self._buf += chunk

    def alive(self) -> bool:
        return self.proc.poll() is None

    def runner_pid(self) -> int:
        """The process that runs the JS: under bubblewrap, the last of bwrap's descendants
        (bwrap, its init, python), else the child itself."""
        if self._runner is None:
            pid = self.pid
            for _ in range(4):
                try:
                    with open(f"/proc/{pid}/task/{pid}/children") as f:
                        found = f.read().split()
                except OSError:
                    break
                if not found:
                    break
                pid = int(found[-1])
            self._runner = pid
        return self._runner

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the JS's process, from /proc (None where unreadable)."""
        try:
            with open(f"/proc/{self.runner_pid()}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        """End the child for good and reap it (safe to call twice)."""
        if self.owner != os.getpid():
            return  # a forked copy: the process is our parent's, not ours
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def start_child() -> Child:
    """Start a child and wait until it is warm (prelude evaluated, locked down)."""
    f = fences()
    argv = [*f.prefix, f.python, "-I", "-c", child_source(), *f.path]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env={}, cwd=empty_dir(),
                            close_fds=True, start_new_session=True)
    child = Child(proc)
    try:
        child.send(json.dumps({"prelude": prelude_source()}).encode())
        line = child.read_line(time.monotonic() + START_TIMEOUT, 1 << 16)
        if line is None or json.loads(line).get("t") != "ready":
            raise SandboxUnavailable(f"the JS sandbox's child did not start (exit "
                                     f"{proc.poll()})")
    except (OSError, TimeoutError, OverflowError, ValueError) as exc:
        child.kill()
        raise SandboxUnavailable(f"the JS sandbox's child did not start: {exc!r}") from exc
    except BaseException:
        child.kill()
        raise
    return child


class Pool:
    """`size` warm children; take() hands one out and a thread starts its replacement."""

    def __init__(self, size: int):
        self.size = size
        self.pid = os.getpid()
        self._ready: deque[Child] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def take(self) -> Child:
        child = None
        with self._lock:
            while self._ready:
                candidate = self._ready.popleft()
                if candidate.alive():
                    child = candidate
                    break
                candidate.kill()
            self._ensure_filler()
        self._wake.set()
        return child if child is not None else start_child()  # cold: the pool ran dry

    def _ensure_filler(self) -> None:
        if self.size > 0 and (self._thread is None or not self._thread.is_alive()):
            self._thread = threading.Thread(target=self._fill, name="js-sandbox-pool",
                                            daemon=True)
            self._thread.start()

    def warm(self) -> None:
        """Start filling now (e.g. at worker start) instead of at the first run."""
        with self._lock:
            self._ensure_filler()
        self._wake.set()

    def _fill(self) -> None:
        failures = 0
        while not self._closed:
            with self._lock:
                missing = self.size - len(self._ready)
            if missing <= 0:
                self._wake.wait(timeout=30)
                self._wake.clear()
                continue
            try:
                child = start_child()
            except Exception as exc:  # keep the worker alive; runs start cold meanwhile
                failures += 1
                log.warning("JS sandbox pool: could not start a child: %s", exc)
                time.sleep(min(30.0, 0.5 * 2 ** min(failures, 6)))
                continue
            failures = 0
            with self._lock:
                if self._closed or self.pid != os.getpid():
                    child.kill()
                    return
                self._ready.append(child)

    def forget(self) -> None:
        """In a forked process: drop our copies of the parent's pipes, touch nothing else
        (an idle child sees EOF, and exits, only once every copy of its stdin is closed)."""
        for child in self._ready:
            for stream in (child.proc.stdin, child.proc.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
        self._ready = deque()

    def ready_count(self) -> int:
        with self._lock:
            return len(self._ready)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        with self._lock:
            children, self._ready = list(self._ready), deque()
        for child in children:
            child.kill()


_pool: Pool | None = None
_pool_lock = threading.Lock()


def pool_size() -> int:
    return get_settings().function_pool_size


def get_pool() -> Pool:
    """This process's pool (made on first use; a forked process makes its own)."""
    global _pool
    pool = _pool
    if pool is not None and pool.pid == os.getpid():
        return pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = Pool(pool_size())
        return _pool


def _after_fork_in_child() -> None:
    # The parent's lock may have been held by another thread at the fork, and its
    # children are not ours: start over with nothing.
    global _pool, _pool_lock, _fences_lock
    if _pool is not None:
        _pool.forget()
    _pool = None
    _pool_lock = threading.Lock()
    _fences_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
