"""Files a reader must never see half-written (reports, CI results), written where another user
may have been first; and output streams whose reader has gone.

A report folder can sit in a shared place (/tmp, a team disk) where someone else may plant a
symbolic link or a folder of their own ahead of time, at the name hangwatch is about to use.
So a private folder is created with `mkdir` (which fails on anything already there), opened
without following a link, checked to be ours, and every file in it is reached through that
open folder: a link swapped in later at its path is never followed. Files are created with
O_EXCL and O_NOFOLLOW under a random name, then renamed into place (a rename replaces a link,
it does not write through it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hangwatch.errors import HangwatchError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeFolder(HangwatchError):
    """A report folder hangwatch will not write into, and why."""


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


def _open_dir(name: str | Path, *, dir_fd: int | None = None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        # Linux says ENOTDIR, not ELOOP, for a link when O_DIRECTORY is asked too.
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and _is_link(name, dir_fd)):
            raise UnsafeFolder(f"{name} is a symbolic link: reports are not written through "
                               f"links") from None
        if exc.errno == errno.ENOTDIR:
            raise UnsafeFolder(f"{name} is not a folder") from None
        raise


def _is_link(name: str | Path, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def open_report_dir(path: Path) -> Iterator[int]:
    """The report folder, created 0700 (with its parents) if missing, opened without following
    a link at its own name: yields its descriptor."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(parents=True, mode=0o700)
    fd = _open_dir(path)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def new_private_dir(parent_fd: int, name: str) -> Iterator[int]:
    """A new folder `name` inside `parent_fd`, 0700 and ours, opened: yields its descriptor.
    FileExistsError when anything (a folder, a link, a file) already has that name."""
    os.mkdir(name, 0o700, dir_fd=parent_fd)
    fd = _open_dir(name, dir_fd=parent_fd)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            # Swapped for someone else's folder between mkdir and open.
            raise UnsafeFolder(f"{name} was replaced by a folder of uid {st.st_uid}")
        os.fchmod(fd, 0o700)  # mkdir's mode is filtered by the umask
        yield fd
    finally:
        os.close(fd)


def write_private(dir_fd: int, name: str, data: bytes) -> None:
    """`data` into `name` in the open folder, 0600, atomically; never through a link."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, _NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
