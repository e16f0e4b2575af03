"""The weaker fence, kept for machines without bubblewrap whose operator opts in
(SWITCHYARD_CODE_SANDBOX_SAME_USER=1): util-linux's `unshare` for a network and PID
namespace, `prlimit`, and `setpriv` to drop a root worker's uid. The command shares the
machine's filesystem, its `/tmp` included, with every other command of the same uid."""

from __future__ import annotations

import subprocess

from tasks.coding.bwrap_fence import Host, drop_user, limits
from tasks.coding.fence import SANDBOX_PATH, RunPolicy, SandboxUnavailable

# PID 1 of a namespace ignores the signals it has no handler for (`kill $$` would do
# nothing), so the command runs as its child; `exit $?` keeps bash from exec'ing it.
INIT_SCRIPT = '"$0" -c "$1"; exit $?'


def namespace_flags(policy: RunPolicy, as_root: bool) -> list[list[str]]:
    """unshare's flags, the best first: the first this machine accepts is used. Always a
    network namespace: this fence has no way to the egress proxy, so a command allowed the
    network is bubblewrap's alone (sandbox.choose_fence)."""
    flags = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if as_root:
        return [flags]
    # Unprivileged, namespaces need a user namespace of their own: the worker's uid mapped
    # to itself (util-linux 2.38+), else to root inside it.
    return [["--user", "--map-current-user", *flags], ["--user", "--map-root-user", *flags]]


def sandbox_argv(command: str, policy: RunPolicy, host: Host, namespaces: list[str]) -> list[str]:
    """The argv that runs `command` behind every fence (the command is one argument)."""
    user = drop_user(policy, host)
    if not host.as_root and host.setpriv:
        user = [host.setpriv, "--no-new-privs", "--"]
    return [*namespaces, *limits(policy, host), *user,
            host.bash, "-c", INIT_SCRIPT, host.bash, command]


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
    """unshare's argv prefix; refused when this machine cannot make the namespaces."""
    if host.unshare is None:
        raise SandboxUnavailable("unshare (util-linux) is not installed: refusing to run a "
                                 "command with network access it must not have")
    why = ""
    for flags in namespace_flags(policy, host.as_root):
        prefix = [host.unshare, *flags, "--"]
        why = _probe(tuple(prefix), host.bash)
        if not why:
            return prefix
    raise SandboxUnavailable(f"cannot create a network namespace ({why}): refusing to run "
                             "a command with network access it must not have")
