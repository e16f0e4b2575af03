"""A TCP forwarder that can be cut: the database "goes away" for one client only.

Restarting the session's PostgreSQL would take every other test's connections
with it; putting this in front of it gives one process under test a database
that can vanish (every connection reset, new ones refused) and come back on the
same address, as a restart or a network partition looks from the client.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.host = host  # the address it listens on (a network namespace's peer, say)
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        with socket.socket() as probe:  # a port of our own, kept across cut/restore
            probe.bind((host, 0))
            self.port = int(probe.getsockname()[1])
        self.restore()

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until restore()."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()

    close = cut

    @property
    def connections(self) -> int:
        """Client connections forwarded right now (each is a client and a server socket)."""
        with self._lock:
            return len(self._conns) // 2

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._conns.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._conns.difference_update((src, dst))
