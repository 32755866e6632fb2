"""systemd's notify protocol, against real datagram sockets."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid

from hangwatch.service.sdnotify import Notifier, status_text


def test_messages_reach_an_abstract_socket_as_key_value_lines():
    name = f"hangwatch-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind("\0" + name)
        server.settimeout(5)
        notifier = Notifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.send("READY=1", "STATUS=" + status_text("a: load,\nidle 3s"))
        assert server.recv(4096) == b"READY=1\nSTATUS=a: load, idle 3s"
        notifier.close()


def test_messages_reach_a_socket_path():
    folder = tempfile.mkdtemp(prefix="hw-", dir="/tmp")
    path = os.path.join(folder, "notify")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
            server.bind(path)
            server.settimeout(5)
            notifier = Notifier({"NOTIFY_SOCKET": path})
            assert notifier.send("WATCHDOG=1")
            assert server.recv(4096) == b"WATCHDOG=1"
            notifier.close()
    finally:
        os.unlink(path)
        os.rmdir(folder)


def test_without_systemd_nothing_is_sent_and_a_gone_socket_is_no_error():
    assert not Notifier({}).enabled and not Notifier({}).send("READY=1")
    assert not Notifier({"NOTIFY_SOCKET": "/nonexistent/notify"}).send("READY=1")


def test_watchdog_period_only_when_meant_for_this_process():
    assert Notifier({"WATCHDOG_USEC": "30000000"}, pid=7).watchdog_s == 30.0
    assert Notifier({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "7"}, pid=7).watchdog_s == 30
    assert Notifier({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "8"}, pid=7).watchdog_s is None
    assert Notifier({"WATCHDOG_USEC": "0"}).watchdog_s is None
