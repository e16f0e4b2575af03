"""An HTTP proxy on a Unix socket that sends tenant traffic only where the egress guard allows.

A sandboxed command allowed "the network" (the coding agent's package installs) still gets a
network namespace of its own with only a loopback; the one way out is this proxy, reached
through a socket bound into the sandbox (tasks/coding/proxy_bridge.py carries the sandbox's
127.0.0.1:3128 to it). Every request names its destination — `CONNECT host:port` for TLS,
an absolute URL for plain HTTP — and is checked by tasks.services.egress exactly like a
deploy hook: the host resolved once, every address judged, the connection made to the
address that was checked; the package registries are allowed by name besides
(SWITCHYARD_CODE_REGISTRY_HOSTS). So the registries are reachable and the operator's loopback,
private network and metadata service are not, whatever the command does; a program that
ignores the proxy variables reaches nothing at all.

Two modes, one socket each: "guarded" (a project's `code_network`: whatever the egress guard
allows, the registries besides) and "setup" (the coding agent's setup phase: the package index
hosts alone, SWITCHYARD_CODE_SETUP_HOSTS, wherever this machine's DNS puts them). One proxy
per mode per worker process, started on first use, a daemon thread per connection.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from tasks.services import egress
from tasks.services.package_indexes import package_index_hosts
from tasks.settings import get_settings

log = logging.getLogger(__name__)

HEAD_MAX = 64 * 1024  # a request head larger than this is no package manager's
PORTS = frozenset({80, 443})  # the web's: a name the operator allows is no door to its Redis
MAX_CONNECTIONS = 64  # per mode and process: one sandbox cannot take the worker's files
CONNECT_TIMEOUT = 15.0
IDLE_TIMEOUT = 300.0  # a tunnel silent this long is closed
SOCKET_NAME = "proxy.sock"

_lock = threading.Lock()
_socket_dirs: dict[str, Path] = {}
_servers: dict[str, threading.Thread] = {}


def destination(mode: str, url: str) -> egress.Destination:
    """Where a request of this mode may connect, or EgressRefused."""
    port = urlsplit(url).port
    if port is not None and port not in PORTS:
        raise egress.EgressRefused(f"port {port} is not one a sandbox may reach (80, 443)")
    if mode == "setup":
        hosts = setup_hosts()
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
        if host not in hosts:
            raise egress.EgressRefused(
                f"{host or url} is not a package index host this setup may reach "
                f"(SWITCHYARD_CODE_SETUP_HOSTS: {', '.join(sorted(hosts)) or 'none'})")
        return egress.resolve(url, egress.Allow(hosts=frozenset(hosts)))
    return egress.resolve(url, egress.allowed_for_packages())


def setup_hosts() -> frozenset[str]:
    configured = get_settings().code_setup_hosts
    if configured:
        return frozenset(h.strip().lower() for h in configured.split(",") if h.strip())
    return package_index_hosts()


def socket_dir(mode: str = "guarded") -> Path:
    """The directory holding this process's proxy socket for `mode` (started on first
    call): bind it into a sandbox and point the bridge at SOCKET_NAME in it."""
    if mode not in ("guarded", "setup"):
        raise ValueError(f"unknown egress mode {mode!r}")
    with _lock:
        found, server = _socket_dirs.get(mode), _servers.get(mode)
        if found is None or server is None or not server.is_alive() \
                or not (found / SOCKET_NAME).exists():
            found = _socket_dirs[mode] = _start(mode)
        return found


def _start(mode: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=f"switchyard-egress-{mode}-{os.getpid()}-"))
    directory.chmod(0o755)  # the sandbox user passes through; only the worker writes here
    path = directory / SOCKET_NAME
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    path.chmod(0o666)  # connecting takes write permission on the socket
    server.listen(64)
    thread = threading.Thread(target=_accept, args=(server, mode), name=f"egress-proxy-{mode}",
                              daemon=True)
    thread.start()
    _servers[mode] = thread
    return directory


def _accept(server: socket.socket, mode: str) -> None:
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    while True:
        try:
            client, _ = server.accept()
        except OSError:  # out of descriptors for a moment: the server lives on
            time.sleep(0.1)
            continue
        if not slots.acquire(blocking=False):
            _answer(client, 503, "too many connections through the proxy at once")
            client.close()
            continue
        threading.Thread(target=_serve_slot, args=(client, mode, slots),
                         name="egress-proxy-conn", daemon=True).start()


def _serve_slot(client: socket.socket, mode: str, slots: threading.BoundedSemaphore) -> None:
    try:
        _serve(client, mode)
    finally:
        slots.release()


def _serve(client: socket.socket, mode: str) -> None:
    upstream: socket.socket | None = None
    try:
        client.settimeout(CONNECT_TIMEOUT)
        head, rest = _read_head(client)
        method, target, version = _request_line(head)
        if method == "CONNECT":
            upstream = _connect(destination(mode, f"https://{target}"))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            first = rest
        else:
            to = destination(mode, target)
            upstream = _connect(to)
            first = _origin_form(head, method, target, version, to.host_header) + rest
        if first:
            upstream.sendall(first)
        _pump(client, upstream)
    except egress.EgressRefused as refused:
        log.info("sandbox egress refused: %s", refused, extra={"action": "egress_refused"})
        _answer(client, 403, f"egress refused: {refused}")
    except _BadRequest as bad:
        _answer(client, 400, str(bad))
    except OSError as exc:
        _answer(client, 502, f"cannot reach the destination: {exc.strerror or exc}")
    finally:
        for s in (client, upstream):
            if s is not None:
                s.close()


class _BadRequest(Exception):
    pass


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(8192)
        if not chunk:
            raise _BadRequest("the request ended before its head did")
        data += chunk
        if len(data) > HEAD_MAX:
            raise _BadRequest("the request head is too large")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _request_line(head: bytes) -> tuple[str, str, str]:
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _BadRequest("not an HTTP proxy request")
    method, target, version = parts
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise _BadRequest("CONNECT names host:port")
    elif not target.lower().startswith("http://"):
        raise _BadRequest("a proxied request names an absolute http:// URL (https goes "
                          "through CONNECT)")
    return method, target, version


def _connect(to: egress.Destination) -> socket.socket:
    """To the address the guard checked, never to what a second lookup would say."""
    return socket.create_connection((to.address, to.port), timeout=CONNECT_TIMEOUT)


def _origin_form(head: bytes, method: str, target: str, version: str, host: str) -> bytes:
    """The head as the origin expects it: the path alone in the request line, the Host the
    guard checked (not another virtual host behind the same address), one connection per
    request (so every request on it was checked: no second host over a kept-alive one)."""
    after_host = target.split("://", 1)[1]
    path = after_host[after_host.find("/"):] if "/" in after_host else "/"
    lines = head.split(b"\r\n")[1:]
    kept = [h for h in lines if not h.lower().startswith(
        (b"connection:", b"proxy-connection:", b"keep-alive:", b"proxy-authorization:",
         b"host:"))]
    return b"\r\n".join([f"{method} {path} {version}".encode("latin-1"),
                         f"Host: {host}".encode("latin-1"), *kept, b"Connection: close",
                         b"", b""])


def _pump(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes or the tunnel idles out."""
    for s in (a, b):
        s.settimeout(IDLE_TIMEOUT)

    def copy(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
                with contextlib.suppress(OSError):
                    s.shutdown(how)

    other = threading.Thread(target=copy, args=(b, a), daemon=True)
    other.start()
    copy(a, b)
    other.join(IDLE_TIMEOUT)


def _answer(client: socket.socket, status: int, message: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway",
              503: "Service Unavailable"}[status]
    body = (message + "\n").encode()
    with contextlib.suppress(OSError):
        client.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
                       f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                       + body)
