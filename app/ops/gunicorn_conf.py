"""gunicorn's settings for the web process (`gunicorn -c python:app.ops.gunicorn_conf`): `switchyard
web`, `switchyard up` and the Procfile use it.

On SIGTERM (a deploy, or Ctrl-C at `switchyard up`) gunicorn's worker stops accepting and
waits, up to its graceful timeout, for the requests in flight; an open event stream (every
browser tab on a project page holds one) is such a request, so the stop took the whole
timeout. The worker's SIGTERM handler now ends the streams first (app.streams.hub.close_streams);
their clients reconnect from their cursor.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

# gunicorn 25's control socket defaults to one path per user ($XDG_RUNTIME_DIR or
# ~/.gunicorn/gunicorn.ctl): every web process of a user, old and new in a rolling deploy
# or two `up`s, would fight over it. Nothing here uses gunicornc.
control_socket_disable = True

# gthread, with a bound on how long receiving one request may take (app.ops.receive_deadline):
# slow clients cannot hold every thread. The command lines name it too (`-k` wins over this).
worker_class = "app.ops.receive_deadline.ThreadWorker"


def post_worker_init(worker: Any) -> None:
    from app.ops import lingering
    from app.ops.receive_deadline import ThreadWorker

    if not isinstance(worker, ThreadWorker):  # `-k gthread` from an older command line
        worker.log.warning("worker class %s does not bound how long a request may take to "
                           "arrive: slow clients can hold every thread; use -k %s.%s",
                           type(worker).__name__, ThreadWorker.__module__, ThreadWorker.__name__)
    lingering.install()  # a client that keeps its end open stalls nobody (app.ops.lingering)
    handle_exit = worker.handle_exit

    def on_sigterm(sig: int, frame: Any) -> None:
        from app.streams.hub import hub

        # Not in the handler itself: it may interrupt a thread holding the hub's lock.
        threading.Thread(target=hub.close_streams, name="close-streams", daemon=True).start()
        handle_exit(sig, frame)

    signal.signal(signal.SIGTERM, on_sigterm)
