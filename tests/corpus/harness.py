"""Judge hangwatch on real hang logs pasted into public issue threads.

`index.yaml` lists each excerpt with its source thread, the framework that printed it, the
built-in pack for that framework (or null) and what the thread says hung: the phases and
signals any one of which counts as a right answer, or `healthy`. Each excerpt is read the way
`hangwatch check` reads a log (the engine `build_engine` builds, `read_log`, `result`), once
with every built-in pack and once leaving its framework out: the framework's own pack (and
every pack extending it) and every other rule `written_for.yaml` records as written because of
that framework's excerpts. That measures what the rest, the generic layer included, make of a
framework nobody wrote rules for. Where no record says which rules a framework's excerpts
brought (most of the generic layer was written with the whole corpus in view), only its pack
is left out, and `measure` says so.

`first_sight`, where an entry has it, is what hangwatch said of the excerpt before any rule was
written for it (`right` or `wrong`): kept beside today's result, it is the figure closest to a
log nobody has seen.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hangwatch.commands.check import read_log, result
from hangwatch.core.clock import SystemClock
from hangwatch.core.engine import Engine
from hangwatch.core.model import PhaseRule, RulePack
from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_builtin_packs
from hangwatch.storage.yamlfile import parse_yaml

CORPUS = Path(__file__).resolve().parent
INDEX = CORPUS / "index.yaml"

# The generic layer's ids: the contract between this corpus and rules/generic.yaml. An
# expectation may name them whether or not that pack is loaded.
GENERIC_PACK = "generic"
GENERIC_PREFIX = "generic:"
GENERIC_PHASES = frozenset(f"generic:{p}" for p in (
    "data_load", "model_load", "build", "distributed_init", "resource_wait", "train_loop",
    "evaluation", "checkpoint_save", "shutdown"))
GENERIC_SIGNALS = frozenset(f"generic:{s}" for s in (
    "stall_warning", "timeout", "watchdog", "oom", "connection_error", "address_in_use",
    "missing_peer"))
ENTRY_KEYS = {"file", "source", "framework", "pack", "expect", "note", "first_sight"}
OPTIONAL_KEYS = {"note", "first_sight"}
FIRST_SIGHT = ("right", "wrong")
WRITTEN_FOR = CORPUS / "written_for.yaml"
STALL_S = 600.0
NO_PACK = "(frameworks without a pack)"


@dataclass(frozen=True)
class Entry:
    file: str
    source: str
    framework: str
    pack: str | None
    phases: frozenset[str] = frozenset()
    signals: frozenset[str] = frozenset()
    healthy: bool = False
    note: str = ""
    first_sight: bool | None = None  # right before any rule was written for it; None: unknown
    root: Path = CORPUS  # the folder of its index: excerpts may be kept outside the repository

    @property
    def path(self) -> Path:
        return self.root / self.file


@dataclass(frozen=True)
class Outcome:
    entry: Entry
    right: bool
    phase: str | None
    step: str | None
    signals: tuple[str, ...]
    verdict: str
    between: str = ""

    def reported(self) -> str:
        where = self.phase or (f"no phase, {self.between}" if self.between else "no phase")
        if self.step:
            where += f" / step {self.step}"
        return f"{where}; signals: {', '.join(self.signals) or 'none'}; {self.verdict}"


@dataclass
class Tally:
    n: int = 0
    packs_on: int = 0
    leave_one_out: int = 0
    healthy: int = 0
    healthy_right: int = 0
    first_seen: int = 0  # hangs whose first-sight result is known
    first_right: int = 0
    left_out: str = ""  # what leaving the framework out drops (see `leaving_out`)
    wrong: list[tuple[str, Outcome]] = field(default_factory=list)


def _ids(value: Any) -> frozenset[str]:
    return frozenset(str(v) for v in value or ())


def parse_entry(raw: dict[str, Any], root: Path = CORPUS) -> Entry:
    expect = raw.get("expect")
    healthy = expect == "healthy"
    phases = signals = frozenset[str]()
    if isinstance(expect, dict):
        phases, signals = _ids(expect.get("phases")), _ids(expect.get("signals"))
    first = raw.get("first_sight")
    return Entry(file=str(raw.get("file", "")), source=str(raw.get("source", "")),
                 framework=str(raw.get("framework", "")), pack=raw.get("pack"), phases=phases,
                 signals=signals, healthy=healthy, note=str(raw.get("note", "")),
                 first_sight=None if first is None else first == "right", root=root)


def load_index(path: Path = INDEX) -> list[Entry]:
    return [parse_entry(raw, path.parent) for raw in raw_index(path)]


def raw_index(path: Path = INDEX) -> list[dict[str, Any]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(data, list):
        raise ValueError(f"{path}: the index is a list of entries")
    return data


@functools.cache
def builtin_packs() -> tuple[RulePack, ...]:
    return tuple(load_builtin_packs())


def extenders(name: str, packs: Sequence[RulePack]) -> set[str]:
    """`name` and every pack that extends it, directly or through others."""
    out = {name}
    grew = True
    while grew:
        grew = False
        for pack in packs:
            if pack.name not in out and out.intersection(pack.extends):
                out.add(pack.name)
                grew = True
    return out


@functools.cache
def rule_set(left_out: str | None = None) -> RuleSet:
    """Every built-in pack, less `left_out` and the packs that extend it."""
    packs = builtin_packs()
    dropped = extenders(left_out, packs) if left_out else set()
    return RuleSet([p for p in packs if p.name not in dropped])


# A record's rule: its id, and the alternatives of its pattern written for the framework
# (none: the whole rule).
Written = dict[str, tuple[str, ...]]


@functools.cache
def written_for() -> dict[str, dict[str, Written]]:
    """framework -> pack -> the rules (and alternatives of their patterns) written because of
    that framework's excerpts. An item is a rule's id, or `{id: [alternative, ...]}` for some
    alternatives of a pattern written as a list (packs/parse.py joins them `(?:a)|(?:b)`)."""
    # parse_yaml refuses a key given twice: a framework recorded twice would keep one record.
    data = parse_yaml(WRITTEN_FOR.read_text(encoding="utf-8"), str(WRITTEN_FOR)) or {}
    return {str(fw): {str(pack): _written(items) for pack, items in by.items()}
            for fw, by in data.items()}


def _written(items: list[Any]) -> Written:
    """A rule's alternatives recorded in several items (one round's, another's) add up; a rule
    recorded whole stays whole."""
    out: Written = {}
    for item in items:
        if isinstance(item, dict):
            for key, alternatives in item.items():
                if out.get(str(key), None) != ():
                    out[str(key)] = out.get(str(key), ()) + tuple(str(a) for a in alternatives)
        else:
            out[str(item)] = ()
    return out


def _token(alternative: str) -> str:
    """How an alternative stands in `|` + its pattern + `|` (packs/parse.py joins a list of
    them `(?:a)|(?:b)`)."""
    return f"|(?:{alternative})|"


def _holds(pattern: str, alternative: str) -> bool:
    """Whether `alternative` is one of those `pattern` joins."""
    return _token(alternative) in f"|{pattern}|"


def without_alternatives(pattern: str, alternatives: tuple[str, ...]) -> str | None:
    """`pattern` (alternatives joined `(?:a)|(?:b)`) less `alternatives`; None when none is
    left. An alternative it does not hold is an error: a stale record must not pass."""
    if alternatives == (pattern,):
        return None  # a pattern written alone, recorded whole
    joined = f"|{pattern}|"
    for alternative in alternatives:
        token = _token(alternative)
        if token not in joined:
            raise ValueError(f"written_for.yaml: {alternative!r} is no alternative of "
                             f"{pattern[:60]!r}")
        joined = joined.replace(token, "|", 1)
    return joined[1:-1] or None


def leaving_out(framework: str, pack: str | None) -> str:
    """What leaving `framework` out drops, in words for the figures."""
    parts = [f"pack {pack}"] if pack else []
    record = written_for().get(framework, {})
    for p, written in sorted(record.items()):
        whole = sum(not alternatives for alternatives in written.values())
        some = sum(len(alternatives) for alternatives in written.values())
        parts += [f"{whole} rule(s) of {p}"] if whole else []
        parts += [f"{some} alternative(s) of {p}"] if some else []
    return " + ".join(parts) if parts else "nothing (no record)"


@functools.cache
def without_framework(framework: str, pack: str | None) -> RuleSet:
    """Every built-in pack less the framework's own (and its extenders), and less the rules
    `written_for.yaml` records as written because of that framework."""
    packs = builtin_packs()
    dropped = extenders(pack, packs) if pack else set()
    record = written_for().get(framework, {})
    kept = []
    for p in packs:
        if p.name in dropped:
            continue
        written = record.get(p.name)
        if written:
            p = dataclasses.replace(
                p, phases=_kept_phases(p.phases, written),
                signals=_kept(p.signals, "match", written),
                progress=_kept(p.progress, "match", written),
                noise=_kept(p.noise, "match", written),
                stack_rules=_kept(p.stack_rules, "pattern", written))
        kept.append(p)
    return RuleSet(kept)


def _kept(rules: tuple[Any, ...], key: str, written: Written) -> tuple[Any, ...]:
    """`rules` less those written, and less the alternatives written of the others."""
    out = []
    for rule in rules:
        if rule.id not in written:
            out.append(rule)
            continue
        pattern = without_alternatives(getattr(rule, key), written[rule.id]) \
            if written[rule.id] else None
        if pattern is not None:
            out.append(dataclasses.replace(rule, **{key: pattern}))
    return tuple(out)


def _kept_phases(rules: tuple[PhaseRule, ...], written: Written) -> tuple[PhaseRule, ...]:
    """Phases less those written, and less the alternatives written of the others' START or
    DONE (each alternative is looked for in both); a phase left with no START goes."""
    out = []
    for rule in rules:
        if rule.id not in written:
            out.append(rule)
            continue
        if not written[rule.id]:
            continue
        of_start = tuple(a for a in written[rule.id] if _holds(rule.start, a))
        of_done = tuple(a for a in written[rule.id] if a not in of_start)
        start = without_alternatives(rule.start, of_start) if of_start else rule.start
        done = without_alternatives(rule.done or "", of_done) if of_done else rule.done
        if start is not None:
            out.append(dataclasses.replace(rule, start=start, done=done))
    return tuple(out)


def engine_for(rules: RuleSet) -> Engine:
    """The engine `build_engine` builds for `hangwatch check`, reading line by line: an
    excerpt is a few dozen lines, and a prefilter for each framework's rule set cost 25 times
    the reading. The events are the same both ways (tests/core/test_prefilter.py on these
    excerpts; `test_the_harness_reads_an_excerpt_as_the_check_command_does`)."""
    return Engine(rules, default_stall=STALL_S, clock=SystemClock())


def known_ids() -> tuple[set[str], set[str]]:
    """Phase ids and signal ids an expectation may name."""
    rules = rule_set()
    return ({p.id for p in rules.phases} | GENERIC_PHASES,
            {s.id for s in rules.signals} | GENERIC_SIGNALS)


def problems(raw: dict[str, Any], root: Path = CORPUS) -> list[str]:
    """What is wrong with one index entry (excerpts under `root`), as messages naming it."""
    name = raw.get("file", "?")
    out = [f"{name}: unknown key {k!r}" for k in raw if k not in ENTRY_KEYS]
    out += [f"{name}: missing {k}" for k in sorted(ENTRY_KEYS - OPTIONAL_KEYS) if k not in raw]
    if "first_sight" in raw and raw["first_sight"] not in FIRST_SIGHT:
        out.append(f"{name}: first_sight is `right` or `wrong`")
    if not (root / str(name)).is_file():
        out.append(f"{name}: no such excerpt")
    if not str(raw.get("source", "")).startswith("https://"):
        out.append(f"{name}: source must be the https URL of the thread")
    pack = raw.get("pack")
    if pack is not None and pack not in {p.name for p in builtin_packs()}:
        out.append(f"{name}: unknown pack {pack!r}")
    expect = raw.get("expect")
    if expect == "healthy":
        return out
    if not isinstance(expect, dict) or set(expect) - {"phases", "signals"}:
        return [*out, f"{name}: expect is `healthy` or a mapping of phases and signals"]
    phases, signals = known_ids()
    entry = parse_entry(raw)
    if not entry.phases and not entry.signals:
        out.append(f"{name}: expects no phase and no signal")
    out += [f"{name}: unknown phase {p!r}" for p in sorted(entry.phases - phases)]
    out += [f"{name}: unknown signal {s!r}" for s in sorted(entry.signals - signals)]
    return out


def qualified(rule_id: str | None, rules: RuleSet) -> str | None:
    """The id as an expectation names it: `generic:<id>` for a rule of the generic pack,
    however the engine spells it."""
    if rule_id is None or rule_id.startswith(GENERIC_PREFIX):
        return rule_id
    rule = rules.phase(rule_id) or next((s for s in rules.signals if s.id == rule_id), None)
    if rule is not None and rule.origin.pack == GENERIC_PACK:
        return GENERIC_PREFIX + rule_id
    return rule_id


def generic_kinds(text: str, rules: RuleSet) -> tuple[str, ...]:
    """The generic layer's signals whose own words the line of a signal holds. A pack's
    signal names such a line first (`nccl_collective_timeout` for the NCCL watchdog's
    timeout) and the generic one stays silent, yet the line is that kind all the same: an
    expectation of `generic:watchdog` is met by it."""
    return tuple(qualified(s.id, rules) or s.id for s in rules.signals
                 if s.origin.pack == GENERIC_PACK and rules.compiled(s.match).search(text))


def places(named: Iterable[PhaseRule | None], rules: RuleSet) -> set[str]:
    """The ids an answer naming these phases meets: each phase's own, and its kind of place
    (`gkd_train_loop` is a `generic:train_loop`; core/model.KINDS)."""
    found = set()
    for rule in named:
        if rule is not None:
            found.add(qualified(rule.id, rules))
            if rule.kind is not None:
                found.add(GENERIC_PREFIX + rule.kind)
    return found


def judge(entry: Entry, rules: RuleSet) -> Outcome:
    """Read the excerpt as `hangwatch check` does, its last line just written."""
    engine = engine_for(rules)
    read_log(engine, entry.path)
    state = engine.state()
    data = result(engine, quiet_s=0.0)
    phase, step = qualified(state["phase"], rules), qualified(state.get("step"), rules)
    placed = qualified(state["place"], rules)  # nothing open: the place the lines before show
    signals = tuple(qualified(s["id"], rules) or s["id"] for s in state["signals"])
    signals += tuple(kind for s in state["signals"] for kind in generic_kinds(s["text"], rules))
    signals += tuple(GENERIC_PREFIX + s["kind"] for s in state["signals"] if s["kind"])
    signals = tuple(dict.fromkeys(signals))  # a kind said twice is one answer
    if entry.healthy:
        errors = any(s["severity"] == "error" for s in state["signals"])
        right = data["verdict"] != "stalled" and not errors
    else:
        # Nothing open: the place expected next (core/order.py) names where it hangs.
        between = engine.between()
        named = [rules.phase(i) for i in (state["phase"], state.get("step"), state["place"])
                 if i is not None] + list(between.before if between else ())
        right = (bool(places(named, rules) & entry.phases)
                 or any(s in entry.signals for s in signals))
    return Outcome(entry, right, phase or placed, step, signals, data["verdict"],
                   data["between"])


def measure(entries: Iterable[Entry]) -> dict[str, Tally]:
    """Per framework, for the frameworks without a pack together (NO_PACK) and overall
    ("all"): hangs right with packs on and with the framework left out, first-sight results
    where known, and healthy excerpts right."""
    tallies: dict[str, Tally] = {}
    for entry in entries:
        keys = (entry.framework, "all") + ((NO_PACK,) if entry.pack is None else ())
        for key in keys:
            tallies.setdefault(key, Tally())
        tallies[entry.framework].left_out = leaving_out(entry.framework, entry.pack)
        on = judge(entry, rule_set())
        if entry.healthy:
            for key in keys:
                tallies[key].healthy += 1
                tallies[key].healthy_right += on.right
                if not on.right:
                    tallies[key].wrong.append(("healthy", on))
            continue
        drops = entry.pack is not None or entry.framework in written_for()
        out = judge(entry, without_framework(entry.framework, entry.pack)) if drops else on
        for key in keys:
            tally = tallies[key]
            tally.n += 1
            tally.packs_on += on.right
            tally.leave_one_out += out.right
            if entry.first_sight is not None:
                tally.first_seen += 1
                tally.first_right += entry.first_sight
            tally.wrong += [(label, o) for label, o in (("packs on", on), ("left out", out))
                            if not o.right and (label == "packs on" or drops)]
    return tallies


def percent(right: int, n: int) -> float:
    return 100.0 * right / n if n else 100.0
