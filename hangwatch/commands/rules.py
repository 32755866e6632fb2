"""`hangwatch rules`: list, show, lint and test rule packs.

`test` is the tool for writing a pack: it runs the real engine over a log, block by block with
the same matcher as `check` (so a log of millions of lines takes seconds), counts which rules
hit, which never did and which lines nothing matched, and for the lines asked for (`--show`)
says which rule hit and whether the line counted as progress.
"""

from __future__ import annotations

import argparse
import copy
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import regex

from hangwatch.core.clock import FakeClock
from hangwatch.core.events import PhaseEvent
from hangwatch.core.hitcounts import HitCounter, HitLines
from hangwatch.core.lines import LineSplitter
from hangwatch.core.meaning import HitKind, LineMatch
from hangwatch.core.model import PhaseRule, RulePack
from hangwatch.core.progress import ProgressJudge
from hangwatch.core.rules import KINDS, RuleSet
from hangwatch.core.stackrules import StackRule
from hangwatch.core.wrap import Unwrapper, physical
from hangwatch.errors import ConfigError, ConfigErrors, ExitStatus, HangwatchError
from hangwatch.escape.terminal import safe
from hangwatch.packs.load import load_builtin_packs, load_pack_file, load_rule_set, rule_files

READ_SIZE = 1 << 20
EXAMPLES = 5  # unmatched lines shown in the summary
TEXT_WIDTH = 160


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    actions = {"list": _list, "show": _show, "lint": _lint, "test": _test}
    return actions[args.rules_command](args, out)


# --- list ----------------------------------------------------------------------------------


def _list(args: argparse.Namespace, out: TextIO) -> int:
    rules = load_rule_set(args.rules)
    rows: list[dict[str, Any]] = [{"pack": p.name, "source": "built-in" if p.builtin else p.file,
             "extends": list(p.extends), "description": p.description, **p.rule_count()}
            for p in rules.packs]
    if args.json:
        out.write(json.dumps({"packs": rows}, ensure_ascii=False) + "\n")
        return ExitStatus.OK
    counts = ("phases", "signals", "noise", "progress", "finish", "diagnoses")
    width = max(len(r["pack"]) for r in rows)
    print(f"{'PACK':<{width}}  " + " ".join(f"{c.upper():>9}" for c in counts)
          + "  SOURCE    DESCRIPTION", file=out)
    for r in rows:
        source = "built-in" if r["source"] == "built-in" else "--rules"
        print(f"{r['pack']:<{width}}  " + " ".join(f"{r[c]:>9}" for c in counts)
              + f"  {source:<8}  {_first_sentence(r['description'])}", file=out)
    return ExitStatus.OK


def _first_sentence(text: str) -> str:
    head = text.split(". ")[0]
    return head if len(head) <= 80 else head[:77] + "..."


# --- show ----------------------------------------------------------------------------------


def _show(args: argparse.Namespace, out: TextIO) -> int:
    rules = load_rule_set(args.rules)
    by_name = {p.name: p for p in rules.packs}
    pack = by_name.get(args.pack)
    if pack is None:
        raise HangwatchError(f"no pack named {args.pack!r} (known: {', '.join(sorted(by_name))})")
    sections = effective_rules(rules, pack)
    stacks = _stack_rules(rules, pack)
    if args.json:
        doc = {"pack": pack.name, "description": pack.description, "extends": list(pack.extends),
               "file": pack.file,
               **{kind: [{**_rule_dict(r), "origin": _origin(r)} for r in items]
                  for kind, items in sections.items()},
               "stacks": [{**_stack_dict(r), "origin": {"pack": owner, "file": r.file,
                                                        "line": r.line}}
                          for owner, r in stacks]}
        out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        return ExitStatus.OK
    out.write(_show_yaml(pack, sections, stacks))
    return ExitStatus.OK


def _stack_rules(rules: RuleSet, pack: RulePack) -> list[tuple[str, StackRule]]:
    """(owning pack, rule) for the `stacks:` rules of `pack` and the packs it extends, in the
    order they are tried."""
    family = _ancestors(pack, {p.name: p for p in rules.packs})
    owner = {id(r): p.name for p in rules.packs if p.name in family for r in p.stack_rules}
    return [(owner[id(r)], r) for r in rules.stack_rules if id(r) in owner]


def _stack_dict(rule: StackRule) -> dict[str, Any]:
    data: dict[str, Any] = {"id": rule.id, "match": rule.pattern}
    if rule.phase:
        data["phase"] = rule.phase
    data["label"] = rule.label
    return data


def effective_rules(rules: RuleSet, pack: RulePack) -> dict[str, list[Any]]:
    """The rules `pack` and the packs it extends contribute, each as it runs after overrides
    (by an extending built-in pack or a user pack with the same id)."""
    family = _ancestors(pack, {p.name: p for p in rules.packs})
    sections: dict[str, list[Any]] = {}
    for kind in KINDS:
        ids = {r.id for p in rules.packs if p.name in family for r in getattr(p, kind)}
        sections[kind] = [r for r in getattr(rules, kind) if r.id in ids]
    return sections


def _ancestors(pack: RulePack, by_name: dict[str, RulePack]) -> set[str]:
    seen: set[str] = set()
    todo = [pack.name]
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        todo.extend(by_name[name].extends)
    return seen


def _rule_dict(rule: Any) -> dict[str, Any]:
    """A rule in the pack file schema, so `show` output can be copied into a pack."""
    if isinstance(rule, PhaseRule):
        data: dict[str, Any] = {"id": rule.id, "title": rule.title, "start": rule.start}
        if rule.done:
            data["done"] = rule.done
        if rule.stall_after is not None:
            data["stall_after"] = _duration_text(rule.stall_after)
    else:
        data = {"id": rule.id}
        for key in ("match", "severity", "counter"):
            if getattr(rule, key, None) is not None:
                data[key] = getattr(rule, key)
        if getattr(rule, "heartbeat", False):
            data["heartbeat"] = True
        if hasattr(rule, "when"):
            data["when"] = {k: v[0] if len(v) == 1 else list(v) for k, v in rule.when}
    if getattr(rule, "advice", ()):
        data["advice"] = list(rule.advice)
    return data


def _duration_text(seconds: float) -> str:
    s = int(seconds)
    if s != seconds:
        return f"{seconds:g}s"
    for unit, size in (("h", 3600), ("m", 60)):
        if s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def _origin(rule: Any) -> dict[str, Any]:
    return {"pack": rule.origin.pack, "file": rule.origin.file, "line": rule.origin.line}


def _show_yaml(pack: RulePack, sections: dict[str, list[Any]],
               stacks: Sequence[tuple[str, StackRule]]) -> str:
    import yaml

    head: dict[str, Any] = {"pack": pack.name}
    if pack.description:
        head["description"] = pack.description
    if pack.extends:
        head["extends"] = list(pack.extends)
    parts = [f"# {pack.file}\n", _dump(head)]
    for kind, items in sections.items():
        if not items:
            continue
        parts.append(f"\n{kind}:\n")
        for rule in items:
            parts.append(f"  # from {rule.origin.pack} ({rule.origin})\n")
            body = yaml.safe_dump([_rule_dict(rule)], sort_keys=False, allow_unicode=True,
                                  width=100)
            parts.append("".join(f"  {line}\n" for line in body.splitlines()))
    if stacks:
        parts.append("\nstacks:\n")
    for owner, stack_rule in stacks:
        parts.append(f"  # from {owner} ({stack_rule.file}:{stack_rule.line})\n")
        body = yaml.safe_dump([_stack_dict(stack_rule)], sort_keys=False, allow_unicode=True,
                              width=100)
        parts.append("".join(f"  {line}\n" for line in body.splitlines()))
    return "".join(parts)


def _dump(data: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))


# --- lint ----------------------------------------------------------------------------------


@dataclass
class LintResult:
    errors: list[ConfigError] = field(default_factory=list)
    warnings: list[ConfigError] = field(default_factory=list)
    packs: list[RulePack] = field(default_factory=list)


def lint(paths: Sequence[Path]) -> LintResult:
    """Each file alone, then all of them merged with the built-in packs (so an id that a
    built-in pack already uses is found)."""
    result = LintResult()
    files: list[Path] = []
    for path in paths:
        try:
            files.extend(rule_files(path))
        except ConfigError as exc:
            result.errors.append(exc)
    builtin_files = {Path(p.file).resolve(): p for p in load_builtin_packs()}
    for file in files:
        try:
            result.packs.append(load_pack_file(file, builtin=file.resolve() in builtin_files))
        except ConfigErrors as exc:
            result.errors.extend(exc.errors)
    for pack in result.packs:
        result.errors.extend(_pattern_errors(pack))
        result.warnings.extend(_pattern_warnings(pack))
    if result.packs:
        linted = {Path(p.file).resolve() for p in result.packs}
        others = [p for f, p in builtin_files.items() if f not in linted]
        try:
            RuleSet([*others, *result.packs])
        except ConfigErrors as exc:
            result.errors.extend(exc.errors)
        result.warnings.extend(_override_notes(others, result.packs))
    return result


def _patterns(pack: RulePack) -> Iterator[tuple[Any, str, str]]:
    for phase in pack.phases:
        yield phase, "start", phase.start
        if phase.done:
            yield phase, "done", phase.done
    for kind in ("signals", "noise", "progress", "finish"):
        for rule in getattr(pack, kind):
            yield rule, "match", rule.match


def _pattern_errors(pack: RulePack) -> Iterator[ConfigError]:
    import regex

    for rule, key, pattern in _patterns(pack):
        if regex.search(pattern, ""):
            yield ConfigError(f"`{key}` matches an empty line, so it hits every line: "
                              f"{pattern!r}", file=pack.file, line=rule.origin.line, rule=rule.id)
    for stack_rule in pack.stack_rules:
        if stack_rule.matches(""):
            yield ConfigError(f"`match` matches an empty frame, so it hits every frame: "
                              f"{stack_rule.pattern!r}", file=pack.file, line=stack_rule.line,
                              rule=stack_rule.id)


def _pattern_warnings(pack: RulePack) -> Iterator[ConfigError]:
    for rule, key, pattern in _patterns(pack):
        if pattern.startswith((".*", "^.*", "(.*")):
            yield ConfigError(f"warning: `{key}` starts with `.*`, which is slow on large logs; "
                              f"patterns are searched anywhere in the line already",
                              file=pack.file, line=rule.origin.line, rule=rule.id)
    for phase in pack.phases:
        if not phase.advice:
            yield ConfigError("warning: phase has no advice; a stall in it will only say where "
                              "it stopped", file=pack.file, line=phase.origin.line, rule=phase.id)


def _override_notes(builtins: Sequence[RulePack],
                    packs: Sequence[RulePack]) -> Iterator[ConfigError]:
    owners = {(kind, r.id): p.name for p in builtins for kind in KINDS for r in getattr(p, kind)}
    for pack in packs:
        if pack.builtin:
            continue
        for kind in KINDS:
            for rule in getattr(pack, kind):
                if (kind, rule.id) in owners:
                    yield ConfigError(f"note: replaces the built-in rule of pack "
                                      f"{owners[(kind, rule.id)]}", file=pack.file,
                                      line=rule.origin.line, rule=rule.id)


def _lint(args: argparse.Namespace, out: TextIO) -> int:
    result = lint([Path(f) for f in args.files])
    if args.json:
        doc = {"ok": not result.errors,
               "errors": [_error_dict(e) for e in result.errors],
               "warnings": [_error_dict(e) for e in result.warnings],
               "packs": [{"pack": p.name, "file": p.file, **p.rule_count()}
                         for p in result.packs]}
        out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    else:
        for problem in [*result.errors, *result.warnings]:
            print(problem.render(), file=out)
        if result.errors:
            print(f"{len(result.errors)} error(s)", file=out)
        for pack in result.packs if not result.errors else ():
            print(f"ok: {pack.file}: pack {pack.name} ({_counts_text(pack)})", file=out)
    return ExitStatus.USAGE if result.errors else ExitStatus.OK


def _counts_text(pack: RulePack) -> str:
    singular = {"phases": "phase", "signals": "signal", "diagnoses": "diagnosis"}
    parts = [f"{n} {singular.get(kind, kind) if n == 1 else kind}"
             for kind, n in pack.rule_count().items() if n]
    return ", ".join(parts) or "no rules"


def _error_dict(error: ConfigError) -> dict[str, Any]:
    return {"file": error.file, "line": error.line, "rule": error.rule,
            "message": error.message}


# --- test ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Show:
    """Which lines `rules test --show` explains one by one: those a rule hits (matched),
    those none hits (unmatched), and line ranges (N, N-M, N-), whatever they hit."""

    matched: bool = False
    unmatched: bool = False
    ranges: tuple[tuple[int, float], ...] = ()

    def __call__(self, number: int, hit: bool) -> bool:
        return ((self.matched if hit else self.unmatched)
                or any(lo <= number <= hi for lo, hi in self.ranges))

    def within(self, first: int, last: int) -> bool:
        """Whether any line numbered first..last may be shown."""
        return (self.matched or self.unmatched
                or any(lo <= last and first <= hi for lo, hi in self.ranges))


def parse_show(text: str) -> Show:
    matched = unmatched = False
    ranges: list[tuple[int, float]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if item in ("matched", "all"):
            matched = True
        if item in ("unmatched", "all"):
            unmatched = True
        if item in ("matched", "unmatched", "all"):
            continue
        found = regex.fullmatch(r"(\d+)(?:(-)(\d*))?", item)
        if found is None or int(found[1]) == 0:
            raise HangwatchError(f"--show: {item!r} is not matched, unmatched, all, a line "
                                 "number N or a range N-M or N-")
        lo = int(found[1])
        hi: float = lo if not found[2] else int(found[3]) if found[3] else float("inf")
        ranges.append((lo, hi))
    return Show(matched, unmatched, tuple(ranges))


@dataclass
class LineReport:
    number: int
    text: str
    progress: bool
    hits: list[dict[str, Any]]


NO_HIT = LineMatch()


class RuleTester:
    """Runs a real Engine over a log, block by block as `check` does, and counts which rules
    each line hits; the lines asked for (`Show`) are fed one at a time and explained: which
    rules hit and why, and whether the line was progress. The clock advances one second
    before each of them, so "progress" means the line reset the engine's idle time."""

    def __init__(self, rules: RuleSet, show: Show = Show()) -> None:
        from hangwatch.session.engines import build_engine, prefilter_for

        self.rules = rules
        self.show = show
        self.clock = FakeClock()
        self.prefilter = prefilter_for(rules)
        self.counter = HitCounter(self.prefilter) if self.prefilter is not None else None
        # Fed lines joined here, and only some of them: the engine must not join rows again.
        self.engine = build_engine(rules, 600.0, clock=self.clock, prefilter=self.prefilter,
                                   unwrap=False)
        self.unwrapper = Unwrapper()
        self._joined: list[int] = []  # of the block being read (core/wrap.py)
        self.counts: Counter[tuple[HitKind, str]] = Counter()
        self.lines = 0  # rows of the log read (line numbers)
        self.joined = 0  # of those, rows a terminal wrapped, joined onto the row before
        self.unmatched = 0
        self.examples: list[str] = []
        self.owner = {r.id: p.name for p in rules.packs for k in KINDS for r in getattr(p, k)}

    def feed_block(self, data: bytes) -> Iterator[LineReport]:
        """Complete lines, each ending in b"\\n"; the reports of the lines shown. Rows a
        terminal wrapped are joined first, as the engine joins them (line numbers are the
        rows where lines begin)."""
        data, self._joined = self.unwrapper.feed(data)
        self.joined += len(self._joined)
        count = data.count(b"\n")
        rows = count + len(self._joined)
        shown = self.show.within(self.lines + 1, self.lines + rows)
        if self.counter is not None and not shown:
            self._count_block(data, count)
            self.lines += rows
            return
        detail = shown or len(self.examples) < EXAMPLES
        hits, noise = self._hit_lines(data, detail)
        for _, _, match in hits:
            self._count(match)
        for rule, n in noise.items():
            self.counts[(HitKind.NOISE, rule.id)] += n
        matched = len(hits) + sum(noise.values())
        self.unmatched += count - matched
        if detail:
            self._find_examples(data, hits)
        if shown:
            yield from self._explained(data, hits)
        else:
            # What the summary reads of the engine (phases, finish, the progress judge's
            # memory) only lines hitting more than noise change: the rest need no second scan.
            self.engine.feed_block("log", b"".join(
                raw + b"\n" for _, raw, match in hits if match._replace(noise=None) != NO_HIT))
        self.lines += rows

    def _count_block(self, data: bytes, count: int) -> None:
        """A block none of whose lines is shown or needed as an example: counted from the
        prefilter's flags, and only the lines hitting more than noise go to the engine."""
        assert self.counter is not None
        counts, matched, feed = self.counter.counts(
            data, self._example if len(self.examples) < EXAMPLES else None)
        for (kind, rule), n in counts.items():
            self.counts[(kind, rule.id)] += n
        self.unmatched += count - matched
        self.engine.feed_block("log", b"".join(raw + b"\n" for raw in feed))

    def _hit_lines(self, data: bytes, detail: bool) -> HitLines:
        if self.counter is not None:
            return self.counter.lines(data, noise_lines=detail)
        found = ((i, raw, self.rules.match(raw.decode("utf-8", "replace")))
                 for i, raw in enumerate(data.split(b"\n")[:-1]))
        return [(i, raw, match) for i, raw, match in found if match is not None], Counter()

    def _count(self, match: LineMatch) -> None:
        for kind, rule in match.hits():
            self.counts[(kind, rule.id)] += 1

    def _find_examples(self, data: bytes, hits: list[tuple[int, bytes, LineMatch]]) -> None:
        hit = {i for i, _, _ in hits}
        for i, raw in enumerate(data.split(b"\n")[:-1]):
            if i not in hit and not self._example(raw):
                return

    def _example(self, raw: bytes) -> bool:
        """An unmatched line, in order: kept if it is among the first EXAMPLES different ones
        that are not blank. Whether more are wanted."""
        stripped = raw.decode("utf-8", "replace").strip()[:TEXT_WIDTH]
        if stripped and len(self.examples) < EXAMPLES and stripped not in self.examples:
            self.examples.append(stripped)
        return len(self.examples) < EXAMPLES

    def _explained(self, data: bytes,
                   hits: list[tuple[int, bytes, LineMatch]]) -> Iterator[LineReport]:
        """Feed the block to the engine, the lines shown one at a time, the rest in runs."""
        matches = {i: match for i, _, match in hits}
        raws = data.split(b"\n")[:-1]
        run: list[bytes] = []
        for i, raw in enumerate(raws):
            number = self.lines + physical(i + 1, self._joined)
            if not self.show(number, i in matches):
                run.append(raw)
                continue
            if run:
                self.engine.feed_block("log", b"\n".join(run) + b"\n")
                run = []
            yield self._explain(number, raw, matches.get(i))
        if run:
            self.engine.feed_block("log", b"\n".join(run) + b"\n")

    def _explain(self, number: int, raw: bytes, match: LineMatch | None) -> LineReport:
        self.clock.advance(1.0)
        # The judge as it stands before this line, to tell which of its progress rules grew.
        judge = copy.deepcopy(self.engine.judge) if match and match.progress else None
        events = self.engine.feed_block("log", raw + b"\n")
        progress = self.engine.idle() == 0.0
        text = raw.decode("utf-8", "replace")
        hits = [] if match is None else list(self._hits(match, events, judge))
        return LineReport(number, text, progress, hits)

    def _hits(self, match: LineMatch, events: list[Any],
              judge: ProgressJudge | None) -> Iterator[dict[str, Any]]:
        phases = {(e.phase, e.state) for e in events if isinstance(e, PhaseEvent)}
        for phase in match.phase_dones:
            done = (phase.id, "completed") in phases
            yield self._hit(HitKind.PHASE_DONE, phase.id, "completed" if done else "was not open")
        for phase in match.phase_starts:
            started = (phase.id, "started") in phases
            yield self._hit(HitKind.PHASE_START, phase.id, "started" if started else "already open")
        for signal in match.signals:
            yield self._hit(HitKind.SIGNAL, signal.id, signal.severity)
        if match.noise is not None:
            yield self._hit(HitKind.NOISE, match.noise.id, "output, not progress")
        for progress, found in match.progress:
            advanced = judge is not None and judge.advances([(progress, found)])
            if progress.counter is not None:
                value = found.group(progress.counter)
                detail = f"{progress.counter}={value} " + ("grew" if advanced else "did not grow")
            else:
                detail = "heartbeat " + ("changed" if advanced else "unchanged")
            yield self._hit(HitKind.PROGRESS, progress.id, detail, advanced=advanced)
        if match.finish is not None:
            yield self._hit(HitKind.FINISH, match.finish.id, "the job ended cleanly")

    def _hit(self, kind: HitKind, rule_id: str, detail: str, **extra: Any) -> dict[str, Any]:
        return {"kind": kind.value, "rule": rule_id, "pack": self.owner.get(rule_id, "?"),
                "detail": detail, **extra}

    def never_hit(self, packs: set[str]) -> list[dict[str, str]]:
        hit = {rule for _, rule in self.counts}
        missing: list[dict[str, str]] = []
        for pack in self.rules.packs:
            if pack.name not in packs:
                continue
            for kind, rules in (("phase", pack.phases), ("signal", pack.signals),
                                ("noise", pack.noise), ("progress", pack.progress),
                                ("finish", pack.finish)):
                missing.extend({"kind": kind, "rule": r.id, "pack": pack.name}
                               for r in rules if r.id not in hit)
        return missing

    def summary(self) -> dict[str, Any]:
        users = {p.name for p in self.rules.packs if not p.builtin}
        hit_packs = {self.owner.get(rule, "?") for _, rule in self.counts}
        scope = users or hit_packs
        state = self.engine.state()
        return {
            "lines": self.lines - self.joined,
            "matched": self.lines - self.joined - self.unmatched,
            "wrapped_rows": self.joined,
            "hits": [{"kind": k.value, "rule": r, "pack": self.owner.get(r, "?"), "count": n}
                     for (k, r), n in sorted(self.counts.items())],
            "never_hit_scope": sorted(scope),
            "never_hit": self.never_hit(scope),
            "unmatched": {"count": self.unmatched, "examples": self.examples},
            "end": {"phase": state["phase"], "last_completed": state["last_completed"],
                    "finished": state["finished"]},
        }


def read_blocks(path: Path) -> Iterator[bytes]:
    """The log in blocks of complete lines, cut as the follower cuts them (a tqdm `\\r`
    redraw is a line)."""
    try:
        with path.open("rb") as fh:
            splitter = LineSplitter()
            while chunk := fh.read(READ_SIZE):
                if block := splitter.push(chunk):
                    yield block
            if block := splitter.flush():
                yield block
    except OSError as exc:
        raise HangwatchError(f"cannot read {path}: {exc.strerror or exc}") from None


def _test(args: argparse.Namespace, out: TextIO) -> int:
    path = Path(args.log)
    show = parse_show(args.show)
    if not path.is_file():
        raise HangwatchError(f"no such log file: {path}")
    tester = RuleTester(load_rule_set(args.rules), show)
    reports: list[dict[str, Any]] = []
    for block in read_blocks(path):
        if not block.endswith(b"\n"):
            block += b"\n"  # an unterminated last line is a line
        for report in tester.feed_block(block):
            if args.json:
                reports.append({"line": report.number, "text": report.text,
                                "progress": report.progress, "hits": report.hits})
            else:
                _print_report(report, out)
    summary = tester.summary()
    if args.json:
        out.write(json.dumps({"log": str(path), "lines": reports, "summary": summary},
                             ensure_ascii=False) + "\n")
    else:
        _print_summary(summary, out, show)
    return ExitStatus.OK


def _print_report(report: LineReport, out: TextIO) -> None:
    verdict = "progress" if report.progress else "quiet"
    print(f"{report.number:>7} {verdict:<8} | {safe(report.text.strip()[:TEXT_WIDTH])}",
          file=out)
    for hit in report.hits:
        print(f"{'':>18}{hit['kind']:<12} {hit['rule']} ({hit['pack']}): "
              f"{safe(str(hit['detail']))}", file=out)


def _print_summary(summary: dict[str, Any], out: TextIO, show: Show) -> None:
    plain = summary["lines"] - summary["matched"]
    if show == Show():
        print("(each line explained with --show matched, unmatched, all, N or N-M)", file=out)
    wrapped = (f" (after joining {summary['wrapped_rows']} rows a terminal wrapped)"
               if summary["wrapped_rows"] else "")
    print(f"\nsummary: {summary['lines']} lines{wrapped}, {summary['matched']} hit a rule, "
          f"{plain} plain (plain lines are progress)", file=out)
    if summary["hits"]:
        print("hits per rule:", file=out)
        for hit in summary["hits"]:
            print(f"  {hit['count']:>7}  {hit['kind']:<12} {hit['rule']} ({hit['pack']})",
                  file=out)
    if summary["never_hit"]:
        scope = ", ".join(summary["never_hit_scope"])
        print(f"rules never hit (packs {scope}):", file=out)
        for rule in summary["never_hit"]:
            print(f"  {rule['kind']:<9} {rule['rule']} ({rule['pack']})", file=out)
    unmatched = summary["unmatched"]
    print(f"lines that matched no rule: {unmatched['count']}", file=out)
    for example in unmatched["examples"]:
        print(f"  | {safe(example)}", file=out)
    end = summary["end"]
    print(f"at the end: phase {end['phase'] or 'none'}, last completed "
          f"{end['last_completed'] or 'none'}, finished: {'yes' if end['finished'] else 'no'}",
          file=out)
