"""Hyperscan databases for the block matcher (`core/prefilter.py`): compiled from translated
patterns (`core/translate.py`), kept between runs in a store, and the forms Hyperscan
refuses widened to ones it takes."""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from hangwatch.core.translate import EVERY_LINE


class DatabaseStore(Protocol):
    """Keeps compiled databases between runs (`hangwatch/storage/cache.py` on disk):
    compiling the built-in rules takes about half a second, loading them microseconds."""

    def load(self, key: str) -> bytes | None: ...

    def save(self, key: str, blob: bytes) -> None: ...


def compile_database(expressions: Sequence[str], ids: Sequence[int] | None = None, *,
             single: bool = False, store: DatabaseStore | None = None) -> Any:
    """A Hyperscan database, or None when Hyperscan refuses the patterns. `single`: each
    pattern reports once a scan (for scans of one line, where only which ones hit matters).
    With a `store`, a database compiled before from the same input is loaded instead."""
    import hyperscan

    flags = hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_SINGLEMATCH if single else 0)
    ids = list(ids or range(len(expressions)))
    key = _key(expressions, ids, flags)
    if store is not None and (blob := store.load(key)) is not None:
        db = _loaded(blob)
        if db is not None:
            return db
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=[e.encode() for e in expressions], ids=ids,
                   elements=len(expressions), flags=flags)
    except hyperscan.error:
        return None
    if store is not None:
        store.save(key, hyperscan.dumpb(db))
    return db


def _key(expressions: Sequence[str], ids: Sequence[int], flags: int) -> str:
    import hyperscan

    version = getattr(hyperscan, "__version__", "")  # the binding bundles the library
    made = [version, platform.machine(), flags, list(ids), list(expressions)]
    return hashlib.sha256(json.dumps(made).encode()).hexdigest()


def _loaded(blob: bytes) -> Any:
    """A stored database, or None when it is damaged or was built for another CPU (a home
    folder shared by different machines): Hyperscan checks both, the second when scanning."""
    import hyperscan

    try:
        db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)  # not kept with the database
        db.scan(b"\n", match_event_handler=_ignore)
    except hyperscan.error:
        return None
    return db


def _ignore(*_args: object) -> None:
    return None


def compilable(forms: dict[int, str], fallback: Callable[[int], str],
                store: DatabaseStore | None = None, *,
                single: bool = False) -> tuple[dict[int, str], set[int], Any]:
    """The forms, as Hyperscan will take them: one it proves can never match is left out (it
    matches no line); one it refuses (an anchor after other items, the empty string, too
    large) becomes its `fallback`, else EVERY_LINE. Also the ids so widened, and the
    database of the forms kept (None when there are none, or they still fail together)."""
    if not forms:
        return forms, set(), None
    db = compile_database(list(forms.values()), list(forms), single=single, store=store)
    if db is not None:
        return forms, set(), db
    kept: dict[int, str] = {}
    widened: set[int] = set()
    for pid, form in forms.items():
        error = _refusal(form)
        if error is None:
            kept[pid] = form
        elif "never match" not in error:
            wider = fallback(pid)
            kept[pid] = wider if _refusal(wider) is None else EVERY_LINE
            widened.add(pid)
    db = (compile_database(list(kept.values()), list(kept), single=single, store=store)
          if kept else None)
    return kept, widened, db


def _refusal(form: str) -> str | None:
    import hyperscan

    try:
        hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK).compile(
            expressions=[form.encode()], flags=hyperscan.HS_FLAG_MULTILINE)
    except hyperscan.error as exc:
        return str(exc)
    return None
