"""Compiled prefilter databases kept on disk: loaded instead of compiled, never trusted blindly."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hangwatch.core.prefilter import Prefilter, build_prefilter, try_build
from hangwatch.core.segments import Pending, Plain
from hangwatch.packs.load import load_rule_set
from hangwatch.storage import cache
from hangwatch.storage.cache import CACHE_ENV, KEEP, SUFFIX, DiskStore, default_store

hyperscan = pytest.importorskip("hyperscan")

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = b"".join(p.read_bytes() for p in sorted(ROOT.glob("tests/fixtures/packs/*/*.log")))


class CountingStore(DiskStore):
    """A DiskStore that counts what it was asked for and what it found."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.found = self.missed = self.saved = 0

    def load(self, key: str) -> bytes | None:
        blob = super().load(key)
        if blob is None:
            self.missed += 1
        else:
            self.found += 1
        return blob

    def save(self, key: str, blob: bytes) -> None:
        self.saved += 1
        super().save(key, blob)


def build(store: DiskStore | None) -> Prefilter:
    prefilter, status = try_build(load_rule_set(), store)
    assert prefilter is not None, status
    return prefilter


def said(prefilter: Prefilter) -> list[tuple[int, str, object]]:
    """What the prefilter says of the fixture logs, with the lazily built databases used."""
    data = SAMPLE + "é ünïcode line with step:1 - \n".encode()  # takes the loose path too
    out: list[tuple[int, str, object]] = []
    for n, text, m in prefilter.segments(data):
        if isinstance(m, Pending):
            text, m = prefilter.resolve(m)
        out.append((n, text, m if m is None or isinstance(m, Plain) else m._replace(
            progress=tuple((r.id, x.span()) for r, x in m.progress))))
    return out


@pytest.fixture(scope="module")
def reference() -> list[tuple[int, str, object]]:
    return said(build(None))


def test_second_build_loads_every_database_instead_of_compiling(tmp_path, reference):
    first = CountingStore(tmp_path)
    assert said(build(first)) == reference
    assert first.found == 0 and first.saved == first.missed > 0

    second = CountingStore(tmp_path)
    assert said(build(second)) == reference
    assert second.found == first.saved
    assert second.missed == second.saved == 0


def test_damaged_database_files_are_compiled_again_and_replaced(tmp_path, reference):
    said(build(DiskStore(tmp_path)))
    files = sorted(tmp_path.glob(f"*{SUFFIX}"))
    for i, path in enumerate(files):
        path.write_bytes(b"" if i % 2 else path.read_bytes()[: 64])
    store = CountingStore(tmp_path)
    assert said(build(store)) == reference
    assert store.saved == len(files)
    again = CountingStore(tmp_path)
    said(build(again))
    assert again.saved == 0 and again.found == len(files)


def test_cache_folder_that_cannot_be_made_costs_only_time(tmp_path, reference):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should go")
    assert said(build(DiskStore(blocker / "hangwatch"))) == reference
    assert blocker.read_text() == "a file where the cache folder should go"


def test_cache_is_private_to_the_user(tmp_path):
    folder = tmp_path / "cache" / "hangwatch"
    build(DiskStore(folder))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    modes = {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert modes == {0o600}


def test_only_the_newest_databases_are_kept(tmp_path, monkeypatch):
    keep = 12  # the same rule as KEEP's, on fewer files
    monkeypatch.setattr(cache, "KEEP", keep)
    store = DiskStore(tmp_path)
    for i in range(keep + 5):
        store.save(f"k{i:03d}", b"x")
        os.utime(tmp_path / f"k{i:03d}{SUFFIX}", (1_000_000 + i, 1_000_000 + i))
    store.save("newest", b"x")
    kept = {p.name for p in tmp_path.iterdir()}
    assert len(kept) == keep
    assert f"newest{SUFFIX}" in kept and f"k{keep + 4:03d}{SUFFIX}" in kept
    assert f"k000{SUFFIX}" not in kept


def test_the_databases_of_the_built_in_rules_all_stay_in_the_cache(tmp_path):
    rules = load_rule_set()
    store = DiskStore(tmp_path)
    prefilter = build_prefilter(rules, store)
    assert prefilter is not None
    prefilter.warm()  # every database reading a log may need
    assert len(list(tmp_path.glob(f"*{SUFFIX}"))) <= KEEP // 2  # room for another rule set


def test_cache_folder_follows_the_environment(tmp_path):
    chosen = default_store({CACHE_ENV: str(tmp_path / "mine")})
    assert chosen is not None and chosen.folder == tmp_path / "mine"
    assert default_store({CACHE_ENV: ""}) is None
    xdg = default_store({"XDG_CACHE_HOME": str(tmp_path)})
    assert xdg is not None and xdg.folder == tmp_path / "hangwatch"


def test_check_keeps_its_databases_in_the_cache_folder(tmp_path):
    import json
    import subprocess
    import sys

    log = ROOT / "tests" / "fixtures" / "packs" / "verl-gkd"
    path = sorted(log.glob("*.log"))[0]
    env = {**os.environ, CACHE_ENV: str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "hangwatch", "check", "--json", str(path)]
    first = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    made = sorted((tmp_path / "cache").glob(f"*{SUFFIX}"))
    second = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert made, first.stderr
    assert sorted((tmp_path / "cache").glob(f"*{SUFFIX}")) == made
    assert json.loads(first.stdout)["verdict"] == json.loads(second.stdout)["verdict"]
    assert first.returncode == second.returncode


def test_translations_are_kept_with_the_databases_and_remade_when_damaged(tmp_path, reference,
                                                                         monkeypatch):
    from hangwatch.core import databases
    from hangwatch.core.translate import line_forms

    made: list[str] = []

    def counted(pattern: str, **kwargs: bool) -> object:
        made.append(pattern)
        return line_forms(pattern, **kwargs)

    monkeypatch.setattr(databases, "line_forms", counted)
    assert said(build(DiskStore(tmp_path))) == reference
    patterns = len(made)
    assert patterns > 100
    made.clear()
    assert said(build(DiskStore(tmp_path))) == reference
    assert made == []  # loaded, not translated
    for path in tmp_path.glob(f"*{SUFFIX}"):  # a list of another shape: not trusted
        if path.read_bytes().startswith(b"[["):
            path.write_bytes(b'[["a", "b", true, false, "c"]]')
    assert said(build(DiskStore(tmp_path))) == reference
    assert len(made) == patterns


def test_the_forms_hyperscan_refuses_are_found_once_then_read_from_the_store(tmp_path,
                                                                              monkeypatch):
    # Finding which form Hyperscan refuses compiles each alone (seconds for a rule set the
    # size of the built-in one): a later start reads the answer from the store.
    pytest.importorskip("hyperscan")
    from hangwatch.core import databases

    forms = {0: "abc", 1: "(?<=x)y", 2: "def"}  # Hyperscan takes no lookbehind
    store = CountingStore(tmp_path)
    first = databases.compilable(forms, lambda _pid: "y", store)
    assert first[:2] == ({0: "abc", 1: "y", 2: "def"}, {1}) and first[2] is not None
    tried: list[str] = []
    monkeypatch.setattr(databases, "_refusal", lambda form: tried.append(form))
    second = databases.compilable(forms, lambda _pid: "y", store)
    assert tried == [] and second[:2] == first[:2] and second[2] is not None


@pytest.mark.parametrize("record", [b"not json", b'{"kept": [[9, "zzz"]], "widened": []}',
                                    b'{"kept": 3}'])
def test_a_damaged_or_foreign_record_of_refused_forms_is_found_again(tmp_path, record):
    pytest.importorskip("hyperscan")
    from hangwatch.core import databases

    forms = {0: "abc", 1: "(?<=x)y"}
    store = CountingStore(tmp_path)
    store.save("taken-" + databases._key(list(forms.values()), list(forms), 0), record)
    kept, widened, db = databases.compilable(forms, lambda _pid: "y", store)
    assert (kept, widened) == ({0: "abc", 1: "y"}, {1}) and db is not None
