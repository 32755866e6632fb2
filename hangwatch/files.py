"""Files a reader must never see half-written (reports, CI results), and output streams whose
reader has gone."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """A temporary file (created 0600) in the same folder, synced, then renamed into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def discard_output(stream: object) -> None:
    """Point the descriptor under `stream` at /dev/null once its reader has gone (`| head`):
    what is still buffered, and the interpreter's own flush at exit, then go nowhere instead
    of raising BrokenPipeError again (as the Python documentation advises). Streams without
    a descriptor are left alone."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()  # type: ignore[attr-defined]
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
