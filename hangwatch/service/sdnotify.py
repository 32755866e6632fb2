"""systemd's notify protocol, spoken directly: one datagram to $NOTIFY_SOCKET per message.

No libsystemd: the protocol is a unix datagram of `KEY=value` lines. An address starting
with `@` is in the abstract namespace (a leading NUL byte). Sending never blocks: a full
socket buffer drops the message, as sd_notify itself would fail, and a service must never
wait on its supervisor.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends to systemd when run under it (Type=notify); does nothing otherwise."""

    def __init__(self, env: Mapping[str, str] = os.environ, pid: int | None = None) -> None:
        self.address = _address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog_s = _watchdog_s(env, os.getpid() if pid is None else pid)
        self._sock: socket.socket | None = None
        if self.address is not None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.setblocking(False)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def send(self, *fields: str) -> bool:
        """One message of `KEY=value` fields; False when it could not be sent."""
        if self._sock is None or self.address is None:
            return False
        try:
            self._sock.sendto("\n".join(fields).encode("utf-8", "replace"), self.address)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def status_text(text: str) -> str:
    """A STATUS= value: one line (a newline would start a field of its own)."""
    return " ".join(text.split())[:1000]


def _address(raw: str) -> str | bytes | None:
    if raw.startswith("@"):
        return b"\0" + raw[1:].encode()
    if raw.startswith("/"):
        return raw
    return None  # unset, or a vsock address, which a service on the host never gets


def _watchdog_s(env: Mapping[str, str], pid: int) -> float | None:
    """The watchdog period systemd expects, when it is meant for this process."""
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and owner != str(pid):
        return None
    return int(usec) / 1e6
