"""Landing pages the browser checks are tried on (one that passes, one that fails), and a
local site to serve them from."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GOOD = """<!doctype html><html><head><title>Tidewater</title>
<meta name="description" content="Tide-aware schedules">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="canonical" href="https://tidewater.example/">
<meta property="og:title" content="Tidewater"><meta property="og:description" content="Tides">
<meta property="og:image" content="https://tidewater.example/og.png">
<meta name="twitter:card" content="summary_large_image">
<style>body{margin:0;font:18px sans-serif} button,input{min-height:48px;min-width:48px}</style>
</head><body><h1>Plan around the tide</h1>
<form method="post" action="/join"><input type="email" name="email">
<button type="submit">Join the waitlist</button></form>
<img src="http://169.254.169.254/latest/meta-data/x.png" alt="">
<script src="http://10.0.0.7/track.js"></script>
</body></html>"""
BAD = """<!doctype html><html><head><title>Wide</title></head><body>
<div style="width:900px">too wide</div><a href="/x" style="font-size:8px">tiny</a>
</body></html>"""


class PageHandler(BaseHTTPRequestHandler):
    """A quiet handler for the tests' local sites; `send_page` answers with a body."""

    def send_page(self, status: int, content_type: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class Landing(PageHandler):
    """Every path is the good landing page."""

    def do_GET(self) -> None:
        self.send_page(200, "text/html", GOOD)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local site on a free port for the block: its base URL (no trailing slash)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
