"""Writes deploy/seccomp-bwrap.json: the seccomp profile the worker container runs under so
that bubblewrap can make the coding agent's sandbox.

The policy is Docker's default one restated, not its file copied: every system call is
allowed except those that administer the kernel (modules, kexec, reboot, swap, clocks,
keyrings, quotas, BPF, perf, io_uring, handles that bypass paths) and `personality` is
limited to the harmless values; then the calls unprivileged user namespaces need, which
Docker's default refuses to a container without CAP_SYS_ADMIN, are allowed: `clone` and
`clone3` with namespace flags, `unshare`, `setns`, `mount`, `umount2`, `pivot_root`,
`chroot`. The kernel still checks each of them against the caller's capabilities in its
own user namespace, so they cannot reach outside the container; what this adds is kernel
code a command can reach (user namespaces have had their share of bugs).

The names come from this machine's kernel headers (x86-64, i386, and the generic table
arm64 uses); runc skips a name an architecture does not have. Run with any python3:
    python3 deploy/make_seccomp_profile.py > deploy/seccomp-bwrap.json
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HEADERS = ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
           "/usr/include/x86_64-linux-gnu/asm/unistd_32.h",
           "/usr/include/asm-generic/unistd.h")
DENIED = {
    # the kernel's own administration: no worker needs it
    "acct", "add_key", "bpf", "clock_adjtime", "clock_adjtime64", "clock_settime",
    "clock_settime64", "create_module", "delete_module", "finit_module", "get_kernel_syms",
    "init_module", "ioperm", "iopl", "kexec_file_load", "kexec_load", "keyctl",
    "lookup_dcookie", "nfsservctl", "perf_event_open", "query_module", "quotactl",
    "quotactl_fd", "reboot", "request_key", "settimeofday", "stime", "swapoff", "swapon",
    "syslog", "sysfs", "_sysctl", "uselib", "userfaultfd", "ustat", "vhangup", "vm86",
    "vm86old",
    # file handles open files without walking their paths (and so past bind mounts)
    "name_to_handle_at", "open_by_handle_at",
    # the new mount API and io_uring: bubblewrap uses neither; much kernel surface
    "fsconfig", "fsmount", "fsopen", "fspick", "move_mount", "open_tree", "mount_setattr",
    "io_uring_enter", "io_uring_register", "io_uring_setup",
    "personality",  # allowed below for the usual values only
}
NAMESPACES = ["clone", "clone3", "unshare", "setns", "mount", "umount", "umount2",
              "pivot_root", "chroot"]
# PER_LINUX, UNAME26, PER_LINUX32, PER_LINUX32|UNAME26, and the query (0xffffffff)
PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF]


def syscall_names() -> set[str]:
    names: set[str] = set()
    for header in HEADERS:
        text = Path(header).read_text()
        names |= set(re.findall(r"#define __NR(?:3264)?_(\w+)\s+\d+", text))
        names |= set(re.findall(r"__SC_\w+\(__NR(?:3264)?_\w+,\s*sys_(\w+)", text))
    return {n for n in names if not n.startswith("syscalls") and n != "arch_specific_syscall"}


def profile() -> dict[str, object]:
    allowed = sorted((syscall_names() - DENIED) | set(NAMESPACES))
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        "archMap": [
            {"architecture": "SCMP_ARCH_X86_64",
             "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
            {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
        ],
        "syscalls": [
            {"names": allowed, "action": "SCMP_ACT_ALLOW"},
            *({"names": ["personality"], "action": "SCMP_ACT_ALLOW",
               "args": [{"index": 0, "value": v, "op": "SCMP_CMP_EQ"}]}
              for v in PERSONALITIES),
        ],
    }


if __name__ == "__main__":
    print(json.dumps(profile(), indent=1))
