"""A real HTTP receiver on 127.0.0.1 that records what is POSTed to it: it answers 200, a
chosen error status, late (after `delay` seconds) or never (holding the connection open until
stopped)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Receiver:
    def __init__(self, port: int = 0, *, status: int = 200, hang: bool = False,
                 delay: float = 0.0) -> None:
        self.port = port
        self.delay = delay
        self.status = status
        self.hang = hang
        self.posts: list[tuple[str, Any]] = []  # (path, parsed JSON body)
        self.arrived: list[float] = []  # monotonic time each POST arrived
        self._changed = threading.Condition()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._changed:
                    receiver.posts.append((self.path, json.loads(body)))
                    receiver.arrived.append(time.monotonic())
                    receiver._changed.notify_all()
                if receiver.hang:
                    receiver._release.wait(60)
                    return
                time.sleep(receiver.delay)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_port
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def bodies(self) -> list[Any]:
        with self._changed:
            return [body for _, body in self.posts]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Any]:
        """The first `count` bodies, waiting up to `timeout` for them."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.posts) >= count, timeout)
            assert len(self.posts) >= count, f"got {len(self.posts)} posts, wanted {count}"
            return [body for _, body in self.posts]
