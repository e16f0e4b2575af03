"""Run inside the sandbox, by the system's python3, before the command: carries the sandbox's
own 127.0.0.1:PORT to the worker's egress proxy socket (tasks.services.egress_proxy), which is
bound into the sandbox. The sandbox has no other way out.

Standalone on purpose (its source is handed to `python3 -c`): nothing of Switchyard is
importable in the sandbox. It returns once it listens, so the command that follows finds the
proxy up; the server lives on in a forked child that the PID namespace ends with the command.
"""

import contextlib
import os
import socket
import sys
import threading


def copy(src, dst):
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                s.shutdown(how)


def serve(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    other = threading.Thread(target=copy, args=(upstream, client), daemon=True)
    other.start()
    copy(client, upstream)
    other.join()
    client.close()
    upstream.close()


def main(path, port):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    if os.fork():
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)  # the command's output pipe must end when the command does
    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client, path), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
