"""The coding agent's git: clone, the patch of a workspace against its base, restore from
base + patch, diffs for the UI, commit and push a branch.

A workspace `dest` holds files only: its repository (`git_dir(dest)`, next to it) belongs
to the worker, so nothing a sandboxed command writes into the workspace can configure the
git the worker runs (a `core.fsmonitor` or a filter in .git/config would run as the worker).
`dest/.git` is a gitfile pointing there, for tools in the workspace that read history; the
worker's own commands never follow it. No conversion applies between the repository and
the workspace (no eol, filter or encoding attributes), so a workspace is exactly its blobs.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tasks.coding import gitcmd
from tasks.coding.gitcmd import NETWORK_TIMEOUT, Auth, GitFailed, check, check_network
from tasks.coding.gitsource import Source, check_source, pin, url_problem
from tasks.coding.payloads import _branch
from tasks.engine.errors import PermanentError
from tasks.settings import get_settings

__all__ = [
    "FileStat",
    "GitFailed",
    "NothingToCommit",
    "PatchTooLarge",
    "Source",
    "branch_name",
    "changes",
    "check_source",
    "clone",
    "commit_and_push",
    "diff_stat",
    "diff_text",
    "git_dir",
    "remove",
    "restore",
    "url_problem",
]

# Highest precedence ($GIT_DIR/info/attributes): bytes in, bytes out, whatever the tree says.
RAW = "* -text !eol -filter -ident -working-tree-encoding\n"
# A second pass when a patch is not UTF-8 (a Latin-1 source file): every change binary.
ALL_BINARY = RAW + "* -diff\n"
def patch_limit() -> int:
    """Bytes: a tool step records the workspace's patch as its output, which the engine
    bounds (SWITCHYARD_STEP_OUTPUT_MAX_BYTES); an eighth is left for JSON's escapes."""
    cap = get_settings().step_output_max_bytes
    return cap - cap // 8
DIFF = ("--no-ext-diff", "--no-textconv", "--no-renames", "--src-prefix=a/",
        "--dst-prefix=b/", "--no-color")
SLUG = re.compile(r"[^a-z0-9]+")
# A branch the agent made: switchyard/<first 8 of the job id>-<slug> (branch_name).
MADE_FOR_JOB = re.compile(r"switchyard/([0-9a-f]{8})-")
BASE_REF = "refs/switchyard/base"  # what the workspace started from (clone or restore)
EPOCH = {"GIT_AUTHOR_DATE": "1970-01-01T00:00:00+0000",
         "GIT_COMMITTER_DATE": "1970-01-01T00:00:00+0000"}


class NothingToCommit(PermanentError):
    """The workspace is the same tree as the commit it would follow."""


class PatchTooLarge(PermanentError):
    pass


@dataclass(frozen=True)
class FileStat:
    path: str
    added: int | None  # lines; None for a binary file
    deleted: int | None


def git_dir(dest: Path) -> Path:
    """Where the repository of workspace `dest` lives: next to it, never inside."""
    dest = Path(dest)
    return dest.with_name(dest.name + ".git")


def remove(dest: Path) -> None:
    """Delete a workspace and its repository."""
    for path in (Path(dest), git_dir(dest)):
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)


def clone(source: Source, dest: Path, *, token: str | None = None,
          branch: str | None = None) -> str:
    """Clone `source` into the workspace `dest` (anything there before is replaced), checked
    out at `branch` (default: the remote's HEAD); the commit checked out. An empty repository
    gets an empty root commit, the same on every machine, as its base."""
    dest = Path(dest)
    if branch is not None:
        _check_branch(branch)
    remove(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    args = ["clone", "--no-checkout", f"--separate-git-dir={git_dir(dest)}"]
    if source.local:
        # A local repository is the operator's, shared by every tenant, and holds each one's
        # pushed branches: the clone takes the one branch it checks out and only the objects
        # that branch reaches (git-aware transport, not a copy of the whole object store).
        args += ["--no-local", "--single-branch"]
    if branch is not None:
        args += ["--branch", branch]
    result = gitcmd.run([*args, "--", source.url, str(dest)], cwd=dest.parent,
                        auth=_auth(source, token), timeout=NETWORK_TIMEOUT)
    try:
        check_network(result, "git clone")
    except Exception:
        remove(dest)
        raise
    info = git_dir(dest) / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(RAW)
    if _git(dest, "rev-parse", "--verify", "--quiet", "HEAD").code != 0:
        _root_commit(dest)
    check(_git(dest, "reset", "--quiet", "--hard", "HEAD"), "checking out the clone")
    head = _head(dest)
    check(_git(dest, "update-ref", BASE_REF, head), "git update-ref")
    return head


def _root_commit(dest: Path) -> None:
    """An empty repository gets an empty first commit to be the base: the same one on every
    machine (fixed identity, date and message), so base + patch restores anywhere."""
    tree = check(_git(dest, "mktree", stdin=b""), "git mktree").decode().strip()
    commit = check(_git(dest, "commit-tree", tree, "-m", "Initial commit", env=EPOCH),
                   "git commit-tree").decode().strip()
    check(_git(dest, "update-ref", "HEAD", commit), "git update-ref")


def changes(dest: Path, base_sha: str, *, limit: int | None = None) -> str:
    """Everything in the workspace that differs from `base_sha` (edits, new files that are not
    ignored, deletions, modes, symlinks, binaries) as one patch `restore` applies."""
    limit = patch_limit() if limit is None else limit
    return _as_text(dest, lambda: _patch(dest, base_sha, limit))


def snapshot(dest: Path, base_sha: str) -> str:
    """The tree a commit of the workspace would hold (its objects written to the repository):
    what `delta` diffs between. The same files give the same tree on any machine."""
    with _staged(dest, base_sha) as index:
        return check(_git(dest, "write-tree", index=index), "git write-tree").decode().strip()


def delta(dest: Path, before: str, after: str, *, limit: int | None = None) -> str:
    """The patch from tree (or commit) `before` to tree `after`: what one step changed, as
    `restore` applies it after the patches of the steps before."""
    limit = patch_limit() if limit is None else limit
    ends = [_object(before), _object(after)]
    return _as_text(dest, lambda: _diff(dest, ends, limit))


def _as_text(dest: Path, make: Callable[[], bytes]) -> str:
    """A patch as text a step output can hold: UTF-8, or, where a text hunk of a file is not
    (a str would not round-trip), made again with every change binary."""
    try:
        return make().decode("utf-8")
    except UnicodeDecodeError:
        with _attributes(dest, ALL_BINARY):
            return make().decode("ascii")


def restore(dest: Path, base_sha: str, patches: str | Sequence[str]) -> None:
    """Make the workspace exactly `base_sha` + `patches` applied in order (what `changes` or
    successive `delta`s gave): every other file, ignored ones included, is removed."""
    dest = Path(dest)
    if not git_dir(dest).is_dir():
        raise PermanentError(f"{dest} has no repository: clone it first, then restore")
    dest.mkdir(parents=True, exist_ok=True)
    _gitfile(dest)
    check(_git(dest, "reset", "--quiet", "--hard", _commit(base_sha)), "git reset")
    check(_git(dest, "update-ref", BASE_REF, _head(dest)), "git update-ref")
    check(_git(dest, "clean", "-ffdxq"), "git clean")
    for patch in [patches] if isinstance(patches, str) else patches:
        if patch:
            check(_git(dest, "apply", "--binary", "--index", "--whitespace=nowarn",
                       stdin=patch.encode("utf-8")), "applying the saved changes")


def diff_stat(dest: Path, base_sha: str) -> list[FileStat]:
    with _staged(dest, base_sha) as index:
        out = check(_git(dest, "diff", "--cached", "--numstat", "-z", *DIFF,
                         _commit(base_sha), "--", index=index), "git diff --numstat")
    stats = []
    for record in out.decode("utf-8", "replace").split("\0"):
        if record:
            added, deleted, path = record.split("\t", 2)
            stats.append(FileStat(path, None if added == "-" else int(added),
                                  None if deleted == "-" else int(deleted)))
    return stats


def diff_text(dest: Path, base_sha: str, limit: int) -> str:
    """The workspace's changes as a readable diff, cut to `limit` characters."""
    with _staged(dest, base_sha) as index:
        result = _git(dest, "diff", "--cached", *DIFF, _commit(base_sha), "--", index=index,
                      cap=limit * 4 + 4)  # 4: the most bytes one character takes in UTF-8
        # Cut short, git was killed: what it wrote is what is shown.
        out = result.out if result.truncated else check(result, "git diff")
        text = out.decode("utf-8", "replace")
    if len(text) > limit or result.truncated:
        return text[:limit] + "\n… (diff cut here)\n"
    return text


def branch_name(job_id: str, task: str) -> str:
    """switchyard/<first 8 of the job id>-<the task as a slug of at most 40 characters>;
    accented letters lose their accents ("Ünïcode" was "n-code", not "unicode")."""
    plain = unicodedata.normalize("NFKD", task).encode("ascii", "ignore").decode()
    slug = SLUG.sub("-", plain.lower()).strip("-")[:40].strip("-") or "task"
    return _check_branch(f"switchyard/{str(job_id)[:8]}-{slug}")


def made_for_job(branch: str) -> str | None:
    """The first 8 hex digits of the id of the job `branch` was named for (branch_name), or
    None when it is not a name the agent gives."""
    match = MADE_FOR_JOB.match(branch)
    return match.group(1) if match else None


def commit_and_push(dest: Path, *, branch: str, message: str, token: str | None) -> str:
    """Commit the workspace onto `branch` and push it to origin; the commit pushed.

    Safe to call again after a crash: when origin's `branch` already holds this tree (an
    earlier attempt pushed it) that commit is the answer and nothing new is made; when it
    holds earlier commits of the agent's, the new commit follows them. A branch holding
    anyone else's commits past this workspace's is refused (a commit is the whole tree: it
    would undo theirs). NothingToCommit when the workspace is where it started.
    """
    dest = Path(dest)
    _check_branch(branch)
    ref = f"refs/heads/{branch}"
    auth = _remote_auth(dest, token)
    with _staged(dest, "HEAD") as index:
        tree = check(_git(dest, "write-tree", index=index), "git write-tree").decode().strip()
    head = _head(dest)
    remote = _remote_commit(dest, ref, auth)
    parent = head
    if remote is not None and remote != head:
        # Ours (the agent's) after our head: an earlier attempt pushed, and this work, a
        # snapshot of the whole tree, continues it. Anyone else's would be undone by it.
        if _is_ancestor(dest, head, remote) and _only_ours(dest, head, remote):
            parent = remote
        elif not _is_ancestor(dest, remote, head):
            raise PermanentError(f"origin's {branch} holds commits this job did not make "
                                 f"({remote[:12]}): not overwriting them")
    base = _base(dest)
    if _tree(dest, base) == tree:
        raise NothingToCommit(f"there is nothing to commit: the workspace is the same as "
                              f"{base[:12]}, where it started")
    if _tree(dest, parent) == tree:
        commit = parent  # this very work is committed already
    else:
        commit = check(_git(dest, "commit-tree", tree, "-p", parent, "-F", "-",
                            stdin=message.encode("utf-8")), "git commit-tree").decode().strip()
    _adopt(dest, ref, commit)
    if remote != commit:
        check_network(_git(dest, "push", "--porcelain", "origin", f"{commit}:{ref}",
                           auth=auth, timeout=NETWORK_TIMEOUT), f"git push to {branch}")
    return commit


# --- internals -------------------------------------------------------------------------

def _git(dest: Path, *args: str, index: Path | None = None, stdin: bytes | None = None,
         auth: Auth | None = None, timeout: float = gitcmd.LOCAL_TIMEOUT,
         cap: int | None = None, env: dict[str, str] | None = None) -> gitcmd.Result:
    return gitcmd.run(args, git_dir=git_dir(dest), work_tree=Path(dest), index=index,
                      stdin=stdin, auth=auth, timeout=timeout, cap=cap, env=env)


def _auth(source: Source, token: str | None) -> Auth:
    if source.local:
        return Auth()
    return Auth(token=token, pin=pin(source.url))


def _remote_auth(dest: Path, token: str | None) -> Auth:
    """Origin as the clone recorded it (in the worker's repository), checked again now."""
    url = check(_git(dest, "config", "--get", "remote.origin.url"), "reading origin").decode()
    url = url.strip()
    if url.startswith("/"):
        return Auth()
    return Auth(token=token, pin=pin(url))


def _check_branch(name: str) -> str:
    try:
        _branch(name)
    except ValueError as exc:
        raise PermanentError(f"branch {name!r}: {exc}") from None
    return name


def _commit(sha: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{4,64}|HEAD", sha):
        raise PermanentError(f"{sha!r} is not a commit id")
    return f"{sha}^{{commit}}" if sha != "HEAD" else sha


def _head(dest: Path) -> str:
    return check(_git(dest, "rev-parse", "HEAD"), "git rev-parse").decode().strip()


def _object(sha: str) -> str:
    """A tree or commit id given to git as itself (never an option or a revision range)."""
    if not re.fullmatch(r"[0-9a-fA-F]{40,64}", sha):
        raise PermanentError(f"{sha!r} is not an object id")
    return sha


def _tree(dest: Path, commit: str) -> str:
    return check(_git(dest, "rev-parse", f"{commit}^{{tree}}"), "git rev-parse").decode().strip()


def _is_ancestor(dest: Path, older: str, newer: str) -> bool:
    result = _git(dest, "merge-base", "--is-ancestor", older, newer)
    if result.code not in (0, 1):
        check(result, "git merge-base")
    return result.code == 0


def _only_ours(dest: Path, older: str, newer: str) -> bool:
    authors = check(_git(dest, "log", "--format=%ae%n%ce", f"{older}..{newer}"), "git log")
    return set(authors.decode().split()) <= {gitcmd.AUTHOR_EMAIL}


def _base(dest: Path) -> str:
    result = _git(dest, "rev-parse", "--verify", "--quiet", BASE_REF)
    return result.out.decode().strip() if result.code == 0 else _head(dest)


def _remote_commit(dest: Path, ref: str, auth: Auth) -> str | None:
    """What origin's `ref` holds (fetched here), or None when it has no such branch."""
    out = check_network(_git(dest, "ls-remote", "origin", ref, auth=auth,
                             timeout=NETWORK_TIMEOUT), "git ls-remote").decode()
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            if _git(dest, "cat-file", "-e", f"{sha}^{{commit}}").code != 0:
                check_network(_git(dest, "fetch", "--no-tags", "origin", ref, auth=auth,
                                   timeout=NETWORK_TIMEOUT), "git fetch")
            return sha
    return None


def _adopt(dest: Path, ref: str, commit: str) -> None:
    """HEAD on `ref` at `commit`, the index matching it (the work tree already does)."""
    check(_git(dest, "update-ref", ref, commit), "git update-ref")
    check(_git(dest, "symbolic-ref", "HEAD", ref), "git symbolic-ref")
    check(_git(dest, "read-tree", commit), "git read-tree")


def _patch(dest: Path, base_sha: str, limit: int) -> bytes:
    with _staged(dest, base_sha) as index:
        result = _git(dest, "diff", "--cached", "--binary", "--full-index", *DIFF,
                      _commit(base_sha), "--", index=index, cap=limit)
    return _bounded(result, limit)


def _diff(dest: Path, ends: list[str], limit: int) -> bytes:
    return _bounded(_git(dest, "diff", "--binary", "--full-index", *DIFF, *ends, "--",
                         cap=limit), limit)


def _bounded(result: gitcmd.Result, limit: int) -> bytes:
    if result.truncated:
        raise PatchTooLarge(f"the workspace's changes are over {limit // 1024} KiB as a patch "
                            "(SWITCHYARD_STEP_OUTPUT_MAX_BYTES): build output that "
                            ".gitignore does not name, or a change to make in smaller parts?")
    return check(result, "git diff")


@contextmanager
def _staged(dest: Path, base: str) -> Iterator[Path]:
    """A throwaway index holding `base` plus the whole work tree (`git add -A`): what a
    commit of the workspace would hold. The workspace's own index is left alone."""
    with tempfile.TemporaryDirectory(prefix="index-", dir=git_dir(dest)) as tmp:
        index = Path(tmp) / "index"
        check(_git(dest, "read-tree", _commit(base), index=index), "git read-tree")
        check(_git(dest, "add", "-A", "--", ".", index=index), "git add")
        yield index


@contextmanager
def _attributes(dest: Path, text: str) -> Iterator[None]:
    path = git_dir(dest) / "info" / "attributes"
    before = path.read_text() if path.exists() else RAW
    path.write_text(text)
    try:
        yield
    finally:
        path.write_text(before)


def _gitfile(dest: Path) -> None:
    """dest/.git, the pointer to the worker's repository, as it should be."""
    dot = dest / ".git"
    if dot.is_symlink() or dot.is_file():
        dot.unlink()
    elif dot.exists():
        shutil.rmtree(dot)
    dot.write_text(f"gitdir: {git_dir(dest)}\n")


def current_branch(dest: Path) -> str:
    """The branch the clone checked out ("main" for a repository that had none)."""
    result = _git(dest, "symbolic-ref", "--quiet", "--short", "HEAD")
    return result.out.decode().strip() if result.code == 0 else "main"


def tracked_files(dest: Path) -> list[str]:
    """The files a commit of the workspace holds, sorted."""
    with _staged(dest, _base(dest)) as index:
        out = check(_git(dest, "ls-files", "-z", index=index), "git ls-files")
    return sorted(name for name in out.decode().split("\0") if name)


def exclude(dest: Path, patterns: tuple[str, ...]) -> None:
    """Never part of the change (the repository's own info/exclude, not its .gitignore)."""
    info = git_dir(dest) / "info"
    info.mkdir(exist_ok=True)
    with (info / "exclude").open("a") as f:
        f.write("\n".join(patterns) + "\n")

