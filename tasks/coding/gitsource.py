"""Which repositories the coding agent may clone: https, http to hosts the operator allows,
or a local path under SWITCHYARD_LOCAL_REPOS; never ssh, git://, ext:: or an option.

`url_problem` is the syntax alone (no DNS, no file system), for the API to refuse at once;
`check_source` adds the egress guard (services.egress) and the local roots, where the clone runs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

from tasks.engine.errors import PermanentError, RetryableError
from tasks.services import egress

SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# user@host:path, host:path: git's scp-like syntax, which is ssh.
SCP_LIKE = re.compile(r"^[^/]*:")
_HOST = r"[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
_PORT = (r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}"
         r"|[0-9]{1,4}))?")
# Every repo_url that may be cloned, and only those (as far as text can tell): an http(s)
# URL with a host (no credentials, no IPv6 literal), a file:// URL or an absolute path. The
# API's schema carries it, so a client learns the rule before sending.
REPO_URL_PATTERN = (rf"^(?:https?://{_HOST}{_PORT}(?:[/?#][^\x00-\x20\x7f]*)?"
                    r"|file://(?:localhost)?/[^\x00-\x1f\x7f]*|/[^\x00-\x1f\x7f]*)$")
REPO_URL = re.compile(REPO_URL_PATTERN)
FORMS = ("an https:// URL, an http:// URL of a host SWITCHYARD_EGRESS_ALLOW names, or an "
         "absolute path (or file:// URL) under SWITCHYARD_LOCAL_REPOS")
LOCAL_OFF = "local repositories are off: the operator names them in SWITCHYARD_LOCAL_REPOS"


@dataclass(frozen=True)
class Source:
    """A checked repository: `url` is what git is given (a URL, or a resolved absolute path)."""
    url: str
    kind: Literal["https", "http", "local"]

    @property
    def local(self) -> bool:
        return self.kind == "local"


def url_problem(repo_url: str) -> str | None:
    """Why `repo_url` can never be cloned, from its text alone; None when REPO_URL_PATTERN
    matches it."""
    if REPO_URL.fullmatch(repo_url):
        return None
    return f"repo_url {_why(repo_url)}: use {FORMS}"


def _why(repo_url: str) -> str:
    if any(ord(c) < 32 or ord(c) == 127 for c in repo_url):
        return "contains control characters"
    if repo_url.startswith("-"):
        return "starts with '-' (git would read it as an option)"
    match = SCHEME.match(repo_url)
    if match and match.group(1) not in ("https", "http", "file"):
        return f"has the scheme {match.group(1)}://, which is not supported"
    if match and "@" in repo_url.split("/")[2]:
        return "carries credentials (set the project's github_token secret instead)"
    if match:
        return "is not a URL with a host name (and an optional port) this accepts"
    if "::" in repo_url:
        return "uses git's <transport>::<address> syntax, which is not supported"
    if SCP_LIKE.match(repo_url):
        return "is an ssh address (host:path), which is not supported"
    return "is neither a URL nor an absolute path"


def check_source(repo_url: str, local_roots: Sequence[Path], *,
                 allow: egress.Allow | None = None,
                 resolver: egress.Resolver | None = None) -> Source:
    """The repository at `repo_url`, if this worker may clone it; PermanentError says why not
    (RetryableError when its host does not resolve now)."""
    problem = url_problem(repo_url)
    if problem:
        raise PermanentError(problem)
    match = SCHEME.match(repo_url)
    scheme = match.group(1).lower() if match else ""
    if scheme in ("https", "http"):
        pin(repo_url, allow, resolver)
        return Source(repo_url, "https" if scheme == "https" else "http")
    path = unquote(urlsplit(repo_url).path) if scheme == "file" else repo_url
    if any(ord(c) < 32 or ord(c) == 127 for c in path):  # %00 and the like, unquoted
        raise PermanentError("repo_url's path contains control characters")
    return Source(str(local_path(path, local_roots)), "local")


def local_path(path: str, local_roots: Sequence[Path]) -> Path:
    if not local_roots:
        raise PermanentError(LOCAL_OFF)
    # Symlinks followed first: a link under a root that points elsewhere is elsewhere. Its
    # existence is only told once it is known to be under a root.
    real = Path(path).resolve()
    roots = [Path(root).resolve() for root in local_roots]
    if not any(real == root or root in real.parents for root in roots):
        # The roots are the operator's: a tenant learns the rule, not where they are.
        raise PermanentError(f"{path} is not under a local repository root this server "
                             "allows (SWITCHYARD_LOCAL_REPOS)")
    if not real.is_dir():
        raise PermanentError(f"{path} is not a directory")
    return real


def pin(url: str, allow: egress.Allow | None = None,
        resolver: egress.Resolver | None = None) -> str:
    """libcurl's "host:port:address" for `url`: the host resolved once and checked by the
    egress guard, so git connects to the address that was checked. http:// only to hosts
    (or addresses) SWITCHYARD_EGRESS_ALLOW names: a token must not cross a network in clear
    unless the operator says that network is theirs."""
    allow = allow if allow is not None else egress.allowed()
    try:
        dest = egress.resolve(url, allow, resolver)
    except egress.EgressRefused as exc:
        raise PermanentError(f"repo_url refused: {exc}") from None
    except OSError as exc:
        raise RetryableError(f"could not resolve the repository's host: {exc}") from None
    if dest.scheme == "http" and dest.host not in allow.hosts \
            and not allow.admits(ipaddress.ip_address(dest.address)):
        raise PermanentError(f"http:// is only for hosts SWITCHYARD_EGRESS_ALLOW names, and "
                             f"{dest.host} is not one: use https://")
    literal = f"[{dest.address}]" if ":" in dest.address else dest.address
    return f"{dest.host}:{dest.port}:{literal}"
