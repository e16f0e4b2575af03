"""A job's checkout, and the one place a path the model names becomes a path on disk.

Every file tool resolves through `Workspace.resolve`, so no tool can reach outside the
checkout (traversal, absolute paths, symlinks) or into git's internals.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from tasks.engine.errors import SwitchyardError
from tasks.settings import get_settings

# A job id names one directory: no separators, no dot-only names, nothing an option
# parser could misread.
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class ToolError(SwitchyardError):
    """A tool's own failure: its message goes back to the model, which can try again.

    `run_tool` turns it into an error result; it escapes only from direct calls.
    """


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def real_root(self) -> Path:
        # The root itself may sit behind a symlink (/tmp on some systems): compare real paths.
        return Path(os.path.realpath(self.root))

    def resolve(self, rel: str) -> Path:
        """The real path `rel` names inside the workspace, or ToolError.

        Symlinks are resolved at every component (the last one and dangling ones too),
        so a link can point anywhere inside but never lead out.
        """
        if not isinstance(rel, str) or not rel.strip():
            raise ToolError("a path is required (relative to the workspace root, '.' for it)")
        if "\x00" in rel:
            raise ToolError(f"path contains a NUL byte: {rel!r}")
        root = self.real_root
        real = Path(os.path.realpath(root / rel))  # an absolute `rel` replaces root here
        if real != root and root not in real.parents:
            raise ToolError(f"path escapes the workspace: {rel}")
        if ".git" in real.relative_to(root).parts:
            # Hooks and config in .git run code when the worker commits; the model edits
            # the working tree only.
            raise ToolError(f"path is inside .git, which tools may not touch: {rel}")
        return real

    def rel(self, path: Path) -> str:
        """`path` relative to the root, as the model sees it ('.' for the root)."""
        root = self.real_root
        real = Path(os.path.realpath(path))
        if real != root and root not in real.parents:
            raise ToolError(f"path escapes the workspace: {path}")
        return real.relative_to(root).as_posix() or "."


def nested_repositories(root: Path) -> list[str]:
    """Directories below the root with a .git of their own, relative to the root.

    A command may plant one; `git add -A` would take it in as a gitlink and later git
    commands would run its config. The worker's git should leave these out (or refuse).
    """
    found = []
    for dirpath, dirnames, filenames in os.walk(root):  # never follows symlinks
        here = Path(dirpath)
        if here != root and (".git" in dirnames or ".git" in filenames):
            found.append(here.relative_to(root).as_posix())
        dirnames[:] = [d for d in dirnames if d != ".git"]
    return sorted(found)


def workspace_for(job_id: str) -> Workspace:
    """The job's workspace under the settings' workspaces_dir (the directory is not created).

    workspaces_dir is made 0711: a sandboxed command (an unprivileged user) must be able to
    pass through it to its own checkout by absolute path (pytest, node and friends stat
    the cwd's absolute path), but not list the other jobs' checkouts.
    """
    if not _JOB_ID.fullmatch(job_id):
        raise ValueError(f"not a job id usable as a directory name: {job_id!r}")
    parent = get_settings().workspaces_dir
    parent.mkdir(parents=True, exist_ok=True)
    parent.chmod(0o711)
    return Workspace(parent / job_id)
