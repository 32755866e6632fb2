"""Where the metrics endpoint listens: `PORT` (loopback), `HOST:PORT` or `[V6]:PORT`. Kept
apart from the server so that checking a config does not import prometheus_client."""

from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"


def parse_listen(text: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT` or `[V6]:PORT`; the host defaults to loopback. Raises ValueError."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text
    host = host.strip("[]") or ""
    if not host:
        raise ValueError(f"{text!r}: give a host before the colon (0.0.0.0:PORT to listen on "
                         "every interface) or just a port for loopback")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected PORT or HOST:PORT (e.g. 127.0.0.1:9464)")
    return host, int(port)


def format_listen(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
