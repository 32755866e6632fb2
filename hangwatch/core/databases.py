"""Hyperscan databases for the block matcher (`core/prefilter.py`): compiled from translated
patterns (`core/translate.py`), kept between runs in a store with the translations, and the
forms Hyperscan refuses widened to ones it takes."""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import regex

from hangwatch.core import translate as translate_module
from hangwatch.core.translate import EVERY_LINE, Translation, line_forms


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
    try:
        db = _compiled(expressions, ids, flags)
    except hyperscan.error:
        return None
    if store is not None:
        store.save(key, hyperscan.dumpb(db))
    return db


# Hyperscan refuses a pattern past about 16,000 bytes. A rule's list of alternatives is one
# pattern, and a long one in its loose form (each caseless letter several ways) passes that:
# a form longer than CUT_CHARS is compiled as its top-level alternatives, each under the
# pattern's id. Their matches are the whole form's; the single-match flag then holds for each
# alternative, so a pattern may report once per alternative (every reader takes a set or the
# first).
CUT_CHARS = 8000


def _compiled(expressions: Sequence[str], ids: Sequence[int], flags: int) -> Any:
    """A block-mode database of the expressions, each long one cut into its alternatives;
    raises hyperscan.error when Hyperscan refuses them."""
    import hyperscan

    cut_expressions: list[str] = []
    cut_ids: list[int] = []
    for expression, pid in zip(expressions, ids, strict=True):
        parts = alternatives(expression) if len(expression) > CUT_CHARS else [expression]
        cut_expressions += parts
        cut_ids += [pid] * len(parts)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[e.encode() for e in cut_expressions], ids=cut_ids,
               elements=len(cut_expressions), flags=flags)
    return db


def alternatives(form: str) -> list[str]:
    """`form`'s top-level alternatives (`a|(?:b|c)|[|]` gives `a`, `(?:b|c)`, `[|]`); the
    form alone when it has none, or its brackets do not balance."""
    parts: list[str] = []
    depth, start, i = 0, 0, 0
    in_class = False
    while i < len(form):
        char = form[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += 1
            i += form.startswith("^", i)
            i += form.startswith("]", i)  # a `]` first in a class is one of its characters
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(form[start:i])
            start = i + 1
        i += 1
    if depth != 0 or in_class or not parts:
        return [form]
    return [*parts, form[start:]]


def translations(patterns: Sequence[str],
                 store: DatabaseStore | None = None) -> list[Translation]:
    """`line_forms` of each pattern (raising Untranslatable as it does). Translating the
    built-in rules takes a tenth of a second of every start (each atom's bytes are found by
    asking `regex`), so with a `store` the forms are kept, keyed by the patterns and by the
    translator itself (its source, the `regex` and Unicode versions it asks)."""
    key = _translation_key(patterns) if store is not None else ""
    if store is not None and (blob := store.load(key)) is not None:
        kept = _translations_in(blob, len(patterns))
        if kept is not None:
            return kept
    found = [line_forms(pattern) for pattern in patterns]
    if store is not None:
        rows = [[t.strict, t.loose, t.exact, t.nullable, t.narrow_strict, t.narrow_loose]
                for t in found]
        store.save(key, json.dumps(rows).encode())
    return found


def _translations_in(blob: bytes, count: int) -> list[Translation] | None:
    """The translations a stored blob holds, or None when it is damaged (then they are
    made and kept again)."""
    try:
        rows = json.loads(blob)
    except ValueError:
        return None
    shape = (str, str, bool, bool, str, str)
    if not (isinstance(rows, list) and len(rows) == count and all(
            isinstance(row, list) and len(row) == len(shape)
            and all(isinstance(v, t) for v, t in zip(row, shape, strict=True))
            for row in rows)):
        return None
    return [Translation(*row) for row in rows]


@functools.cache
def _translator() -> str:
    try:
        source = Path(translate_module.__file__).read_bytes()
    except OSError:  # no source to read (a frozen build): its version stands for it
        source = translate_module.__name__.encode()
    return hashlib.sha256(source).hexdigest() + regex.__version__ + unicodedata.unidata_version


def _translation_key(patterns: Sequence[str]) -> str:
    made = ["translations", _translator(), list(patterns)]
    return hashlib.sha256(json.dumps(made).encode()).hexdigest()


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
    key = "taken-" + _key(list(forms.values()), list(forms), 0)
    found = _stored_taken(store.load(key), forms) if store is not None else None
    if found is None:
        found = _taken(forms, fallback)
        if store is not None:
            store.save(key, json.dumps({"kept": list(found[0].items()),
                                        "widened": sorted(found[1])}).encode())
    kept, widened = found
    db = (compile_database(list(kept.values()), list(kept), single=single, store=store)
          if kept else None)
    return kept, widened, db


def _taken(forms: dict[int, str],
           fallback: Callable[[int], str]) -> tuple[dict[int, str], set[int]]:
    """The forms Hyperscan takes, found by compiling each alone (seconds for a rule set the
    size of the built-in one, so `compilable` keeps the answer in its store)."""
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
    return kept, widened


def _stored_taken(blob: bytes | None,
                  forms: dict[int, str]) -> tuple[dict[int, str], set[int]] | None:
    """What `_taken` said of these forms before, or None when nothing (or nothing sound)
    is stored: a record naming other ids, or not of the shape written, is not trusted."""
    if blob is None:
        return None
    try:
        record = json.loads(blob)
        kept = {int(pid): str(form) for pid, form in record["kept"]}
        widened = {int(pid) for pid in record["widened"]}
    except (ValueError, TypeError, KeyError):
        return None
    return (kept, widened) if set(kept) | widened <= set(forms) else None


def _refusal(form: str) -> str | None:
    import hyperscan

    try:
        _compiled([form], [0], hyperscan.HS_FLAG_MULTILINE)
    except hyperscan.error as exc:
        return str(exc)
    return None
