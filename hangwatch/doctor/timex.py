"""The kernel's clock discipline through adjtimex(2), read-only: what `adjtimex -p` prints."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

TIME_ERROR = 5  # adjtimex's return: the clock is not synchronised
STA_UNSYNC = 0x0040


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class _Timex(ctypes.Structure):
    _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long),
                ("status", ctypes.c_int), ("constant", ctypes.c_long),
                ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                ("time", _Timeval), ("tick", ctypes.c_long), ("ppsfreq", ctypes.c_long),
                ("jitter", ctypes.c_long), ("shift", ctypes.c_int), ("stabil", ctypes.c_long),
                ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long), ("errcnt", ctypes.c_long),
                ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
                ("padding", ctypes.c_int * 11)]


def read_adjtimex() -> dict[str, Any] | None:
    """The kernel's own view (modes=0 only reads): what `adjtimex -p` prints."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        adjtimex = libc.adjtimex
    except (OSError, AttributeError, TypeError):
        return None  # not Linux
    timex = _Timex()
    state = adjtimex(ctypes.byref(timex))
    if state < 0:
        return None
    # Its `offset` is the correction still being slewed, not the distance from true time:
    # only chrony knows that, so the kernel gives the synchronised flag and the error bound.
    return {"source": "adjtimex",
            "synchronized": state != TIME_ERROR and not timex.status & STA_UNSYNC,
            "maxerror_s": timex.maxerror / 1e6}
