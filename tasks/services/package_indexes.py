"""This machine's package index configuration, as a sandboxed install must see it.

The coding agent's setup phase installs a repository's dependencies inside the sandbox,
whose environment holds nothing of the worker's. The operator configured where packages come
from (pip.conf, PIP_* variables, npm's config): that configuration is read here once, with
pip's and npm's own readers, and handed to the sandbox as variables — pip's, uv's (uv does
not read pip.conf) and npm's — and its hosts are what the setup proxy lets through by
default (SWITCHYARD_CODE_SETUP_HOSTS). Never a hard-coded index: PyPI and the npm registry
are only the tools' own defaults when nothing else is configured.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import lru_cache
from urllib.parse import urlsplit

PYPI = "https://pypi.org/simple"
PYPI_FILES = "files.pythonhosted.org"  # where PyPI's index sends the downloads
NPM_REGISTRY = "https://registry.npmjs.org/"
# pip's options that say where packages come from, and uv's names for them.
PIP_TO_UV = {"index-url": "UV_INDEX_URL", "extra-index-url": "UV_EXTRA_INDEX_URL",
             "find-links": "UV_FIND_LINKS", "constraint": "UV_CONSTRAINT",
             "cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT"}
PIP_OPTIONS = (*PIP_TO_UV, "trusted-host", "no-index")


@lru_cache(maxsize=1)
def pip_config() -> dict[str, str]:
    """pip's effective options (files and PIP_* variables), by option name."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, sep, value = line.partition("=")
        option = key.rsplit(".", 1)[-1]
        if sep and option in PIP_OPTIONS:
            # Later lines are the stronger sources (user over global, variables over files).
            found[option] = value.strip().strip("'\"")
    return found


@lru_cache(maxsize=1)
def npm_registry() -> str:
    npm = shutil.which("npm")
    if npm is None:
        return NPM_REGISTRY
    try:
        done = subprocess.run([npm, "config", "get", "registry"], capture_output=True,
                              text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return NPM_REGISTRY
    value = done.stdout.strip()
    return value if done.returncode == 0 and value.startswith(("http://", "https://")) \
        else NPM_REGISTRY


def sandbox_variables() -> dict[str, str]:
    """The variables that make pip, uv and npm in the sandbox use this machine's indexes."""
    out: dict[str, str] = {"npm_config_registry": npm_registry()}
    for option, value in pip_config().items():
        out["PIP_" + option.upper().replace("-", "_")] = value
        if option in PIP_TO_UV:
            out[PIP_TO_UV[option]] = value
    return out


def package_index_hosts() -> frozenset[str]:
    """The hosts of every configured index (PyPI's two and npm's registry by default)."""
    config = pip_config()
    urls = [config.get("index-url", PYPI), npm_registry()]
    for option in ("extra-index-url", "find-links"):
        urls += config.get(option, "").split()
    hosts = {(urlsplit(u).hostname or "").lower() for u in urls
             if u.startswith(("http://", "https://"))}
    if config.get("index-url", PYPI).rstrip("/") == PYPI:
        hosts.add(PYPI_FILES)
    return frozenset(h for h in hosts if h)
