"""A real `hangwatch serve` process, and a datagram socket standing in for systemd."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class Systemd:
    """The receiving end of $NOTIFY_SOCKET: an abstract address (`@name`) or a path."""

    def __init__(self, abstract: bool = True) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._dir = ""
        if abstract:
            name = f"hangwatch-test-{uuid.uuid4().hex}"
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:  # a short folder: a socket path may not exceed 107 bytes
            self._dir = tempfile.mkdtemp(prefix="hw-", dir="/tmp")
            self.address = os.path.join(self._dir, "notify")
            self.sock.bind(self.address)
        self.messages: list[tuple[float, list[str]]] = []

    def wait_for(self, field: str, timeout: float = 30) -> float:
        """Receive until a message holds `field` (e.g. "READY=1"); when it came."""
        for at, fields in self.messages:
            if field in fields:
                return at
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                break
            fields = data.decode().split("\n")
            self.messages.append((time.monotonic(), fields))
            if field in fields:
                return self.messages[-1][0]
        raise AssertionError(f"no {field} within {timeout}s; got {self.messages}")

    def receive_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return
            self.messages.append((time.monotonic(), data.decode().split("\n")))

    def fields(self, prefix: str) -> list[str]:
        return [f for _, fields in self.messages for f in fields if f.startswith(prefix)]

    def close(self) -> None:
        self.sock.close()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)


class Serve:
    """`hangwatch serve ARGS --json` with stdout and stderr in files of `folder`."""

    def __init__(self, folder: Path, args: list[str], systemd: Systemd | None = None,
                 watchdog_usec: int | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("NOTIFY_SOCKET", None)
        if systemd is not None:
            env["NOTIFY_SOCKET"] = systemd.address
        if watchdog_usec is not None:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        n = len(list(folder.glob("serve-*.out")))
        self.out_path = folder / f"serve-{n}.out"
        self.err_path = folder / f"serve-{n}.err"
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "hangwatch", "serve", *args,
                                          "--json"], stdout=out, stderr=err, env=env,
                                         cwd=folder)

    def events(self) -> list[dict[str, Any]]:
        lines = self.out_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def stderr(self) -> str:
        return self.err_path.read_text()

    def wait_event(self, match: Callable[[dict[str, Any]], bool],
                   timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events():
                if match(event):
                    return event
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no such event within {timeout}s (exit {self.proc.poll()}): "
                             f"{self.events()}\n{self.stderr()}")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def wait_until(check: Callable[[], bool], timeout: float = 20, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}")


def saved(state_dir: Path, watch: str) -> dict[str, Any] | None:
    try:
        return json.loads((state_dir / f"{watch}.json").read_text())
    except (OSError, ValueError):
        return None
