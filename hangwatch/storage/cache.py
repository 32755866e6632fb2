"""Compiled prefilter databases kept between runs.

Compiling the built-in rules for Hyperscan takes about half a second, longer than reading
100 MB of log; loading the result takes microseconds. Databases are kept, keyed by what
they were compiled from, under `$HANGWATCH_CACHE_DIR`, else `$XDG_CACHE_HOME/hangwatch`,
else `~/.cache/hangwatch`; `HANGWATCH_CACHE_DIR=` (empty) turns the cache off. A cache that
cannot be read or written is only slower: every error here is swallowed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from hangwatch.storage.files import write_atomic

CACHE_ENV = "HANGWATCH_CACHE_DIR"
# Newest databases kept: a rule set takes about 90 (the prefilter's own, and one for each
# generic phase pattern a log hits, compiled when first hit), of 1 to 250 KB each; several
# rule sets' worth, so that a warm start compiles nothing.
KEEP = 400
SUFFIX = ".hsdb"


class DiskStore:
    """One file a database, named by its key (a hex digest)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def load(self, key: str) -> bytes | None:
        try:
            return (self.folder / f"{key}{SUFFIX}").read_bytes()
        except OSError:
            return None

    def save(self, key: str, blob: bytes) -> None:
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(self.folder / f"{key}{SUFFIX}", blob)
            self._prune()
        except OSError:
            pass

    def _prune(self) -> None:
        def age(path: Path) -> float:
            try:
                return path.stat().st_mtime
            except OSError:
                return 0.0

        kept = sorted(self.folder.glob(f"*{SUFFIX}"), key=age, reverse=True)
        for old in kept[KEEP:]:
            with contextlib.suppress(OSError):
                old.unlink()


def cache_folder(env: Mapping[str, str] = os.environ) -> Path | None:
    """hangwatch's folder in the user's cache, or None when caching is turned off."""
    chosen = env.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen else None
    base = env.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no passwd entry (some containers)
            return None
    return Path(base) / "hangwatch"


def default_store(env: Mapping[str, str] = os.environ) -> DiskStore | None:
    """The user's cache folder, or None when the cache is turned off."""
    folder = cache_folder(env)
    return DiskStore(folder) if folder is not None else None
