"""Machines for the doctor's checks: real sockets and files, fake /proc, /sys and mount tables
written to a temp folder."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hangwatch.doctor.model import Check, Context, Machine, Options


def context(env: Mapping[str, str] | None = None, *, timeout: float = 10.0,
            options: Mapping[str, Any] | None = None, **machine: Any) -> Context:
    """A context on this machine, except what the test replaces."""
    return Context(Machine(env=dict(env or {}), **machine),
                   Options(timeout=timeout, **(options or {})), time.monotonic() + timeout)


def by_id(checks: list[Check], check_id: str) -> Check:
    found = [c for c in checks if c.id == check_id]
    assert len(found) == 1, f"{check_id} in {[c.id for c in checks]}"
    return found[0]


def fake_net(root: Path, interfaces: Mapping[str, bool]) -> Path:
    """A /sys with class/net/NAME/{flags,operstate}; True is up."""
    for name, up in interfaces.items():
        d = root / "class" / "net" / name
        d.mkdir(parents=True)
        (d / "flags").write_text("0x1003\n" if up else "0x1002\n")
        (d / "operstate").write_text(("unknown" if name == "lo" else "up") if up else "down")
    return root
