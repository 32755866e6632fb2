"""The rule-pack format: one pack's YAML into validated plain data (core/model.py's rules),
every problem reported with its place (`file:line: rule <id>: ...`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import regex

from hangwatch.core.durations import parse_duration
from hangwatch.core.evidence import WHEN_KEYS
from hangwatch.core.model import (
    KINDS,
    SEVERITIES,
    SIGNAL_KINDS,
    DiagnosisRule,
    FinishRule,
    NoiseRule,
    Origin,
    PackCheck,
    PhaseRule,
    ProgressRule,
    RankRule,
    RulePack,
    SignalRule,
)
from hangwatch.core.stackrules import StackRule, parse_stack_rules
from hangwatch.errors import ConfigError, ConfigErrors
from hangwatch.storage.yamlfile import YamlMapping, parse_yaml

PACK_KEYS = {"pack", "description", "extends", "layer", "phases", "signals", "noise",
             "progress", "finish", "diagnoses", "checks", "ranks", "stacks"}
LAYERS = ("pack", "generic")
GENERIC_PREFIX = "generic:"  # generic-layer ids are shown, and kept apart, as generic:<id>
SECTION_KEYS: dict[str, tuple[set[str], set[str]]] = {
    # section: (required keys, optional keys)
    "phases": ({"id", "start"}, {"title", "done", "stall_after", "advice", "parent", "nests",
                                 "kind"}),
    "signals": ({"id", "match"}, {"severity", "advice", "kind"}),
    "noise": ({"id", "match"}, set()),
    "progress": ({"id", "match"}, {"counter", "heartbeat"}),
    "finish": ({"id", "match"}, set()),
    "diagnoses": ({"id", "when"}, {"advice"}),
    "checks": ({"id"}, {"env", "path", "status", "fix"}),
    "ranks": ({"id", "match"}, set()),
}
# Limits on what a rule file may ask of hangwatch, far above any real pack (the largest
# built-in pattern is under 200 characters, the largest pack under 40 patterns), so that a
# file from anywhere cannot make loading or matching slow or big.
MAX_PATTERN_CHARS = 2000
MAX_PATTERNS = 10_000  # regular expressions in one file: generated per-step packs run to thousands
ID_PATTERN = regex.compile(r"[a-z][a-z0-9_]*")
PACK_NAME_PATTERN = regex.compile(r"[a-z][a-z0-9_.-]*")
ENV_NAME_PATTERN = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*")



def parse_pack(text: str, name: str, builtin: bool) -> tuple[RulePack, tuple[PackCheck, ...]]:
    """Parse and validate one pack's text; raise ConfigErrors listing every problem in it.
    The pack's `checks:` come apart: `hangwatch doctor` runs them, the engine never sees them."""
    doc = parse_yaml(text, name)
    errors: list[ConfigError] = []
    parser = _PackParser(name, errors, builtin)
    pack = parser.parse(doc)
    if errors or pack is None:
        raise ConfigErrors(errors)
    return pack, parser.checks


class _PackParser:
    def __init__(self, file: str, errors: list[ConfigError], builtin: bool) -> None:
        self.file = file
        self.errors = errors
        self.builtin = builtin
        self.pack = "?"
        self.generic = False
        self.checks: tuple[PackCheck, ...] = ()
        self.patterns = 0  # regular expressions compiled so far

    def error(self, message: str, line: int, rule: str = "") -> None:
        self.errors.append(ConfigError(message, file=self.file, line=line, rule=rule))

    def parse(self, doc: Any) -> RulePack | None:
        if not isinstance(doc, YamlMapping):
            self.error("a rule pack is a mapping with at least a `pack` key", 1)
            return None
        for key in doc:
            if key not in PACK_KEYS:
                self.error(f"unknown key {key!r} (known: {', '.join(sorted(PACK_KEYS))})",
                           doc.key_lines[str(key)])
        name = doc.get("pack")
        if not isinstance(name, str) or not PACK_NAME_PATTERN.fullmatch(name):
            self.error("`pack` must name the pack in lower case (e.g. `pack: my-trainer`)",
                       doc.key_lines.get("pack", doc.line))
            name = "?"
        self.pack = name
        description = doc.get("description", "")
        if not isinstance(description, str):
            self.error("`description` must be text", doc.key_lines["description"])
            description = ""
        extends = self._string_list(doc, "extends", doc.line, "")
        layer = doc.get("layer", "pack")
        if layer not in LAYERS:
            self.error(f"`layer` must be one of {', '.join(LAYERS)}, not {layer!r}",
                       doc.key_lines["layer"])
        self.generic = layer == "generic"
        # Noise (idle metrics, health probes) is as general as words are; how a run ends is
        # each framework's own.
        if self.generic and "finish" in doc:
            self.error("the generic layer names phases, signals and noise; `finish` belongs "
                       "in a pack", doc.key_lines["finish"])
        seen: dict[str, int] = {}
        sections = {
            section: [r for r in self._section(doc, section, seen) if r is not None]
            for section in SECTION_KEYS
        }
        self.checks = tuple(sections["checks"])
        stack_rules = self._stacks(doc)
        return RulePack(
            name=name,
            file=self.file,
            description=description.strip(),
            extends=tuple(extends),
            builtin=self.builtin,
            generic=self.generic,
            phases=tuple(sections["phases"]),
            signals=tuple(sections["signals"]),
            noise=tuple(sections["noise"]),
            progress=tuple(sections["progress"]),
            finish=tuple(sections["finish"]),
            diagnoses=tuple(sections["diagnoses"]),
            ranks=tuple(sections["ranks"]),
            stack_rules=tuple(stack_rules),
        )

    def _stacks(self, doc: YamlMapping) -> list[StackRule]:
        """`stacks:` maps frames to places (core/stackrules.py validates it, with lines)."""
        if "stacks" not in doc:
            return []
        rules, errors = parse_stack_rules(doc["stacks"], self.file, doc.key_lines["stacks"])
        self.errors.extend(errors)
        self.patterns += len(rules)
        return rules

    def _section(self, doc: YamlMapping, section: str, seen: dict[str, int]) -> Iterator[Any]:
        items = doc.get(section)
        if items is None:
            return
        if not isinstance(items, list):
            self.error(f"`{section}` must be a list", doc.key_lines[section])
            return
        required, optional = SECTION_KEYS[section]
        for item in items:
            if not isinstance(item, YamlMapping):
                self.error(f"each entry of `{section}` must be a mapping with an `id`",
                           doc.key_lines[section])
                continue
            rule_id = item.get("id")
            label = str(rule_id) if rule_id is not None else ""
            ok = True
            for key in item:
                if key not in required | optional:
                    known = ", ".join(sorted(required | optional))
                    self.error(f"unknown key {key!r} in {section} (known: {known})",
                               item.key_lines[str(key)], label)
                    ok = False
            for key in sorted(required - set(item)):
                self.error(f"missing required key {key!r} in {section}", item.line, label)
                ok = False
            if rule_id is not None and not (isinstance(rule_id, str)
                                            and ID_PATTERN.fullmatch(rule_id)):
                self.error("`id` must be lower case letters, digits and _ (e.g. weight_sync)",
                           item.key_lines["id"], label)
                ok = False
            elif isinstance(rule_id, str):
                if rule_id in seen:
                    self.error(f"duplicate id {rule_id!r} (first at line {seen[rule_id]})",
                               item.key_lines["id"], label)
                    ok = False
                else:
                    seen[rule_id] = item.key_lines["id"]
            if not required - set(item):
                # Build even a rule already in error, so its values are checked too.
                origin = Origin(self.file, item.line, self.pack, self.generic)
                rule = getattr(self, f"_{section}")(item, origin)
                if ok and rule is not None and self.generic:
                    rule = dataclasses.replace(rule, id=GENERIC_PREFIX + rule.id)
                if ok:
                    yield rule

    # --- one builder per section; each validates its values ---------------------------

    def _phases(self, item: YamlMapping, origin: Origin) -> PhaseRule | None:
        start = self._regex(item, "start")
        done = self._regex(item, "done") if "done" in item else None
        stall_after = None
        if "stall_after" in item:
            try:
                stall_after = parse_duration(item["stall_after"])
            except ValueError as exc:
                self.error(f"bad duration in `stall_after`: {exc}", item.key_lines["stall_after"],
                           item["id"])
                return None
        title = item.get("title", item["id"].replace("_", " "))
        parent = item.get("parent")
        if parent is not None and not (isinstance(parent, str) and ID_PATTERN.fullmatch(parent)):
            self.error("`parent` must name a phase by its id", item.key_lines["parent"],
                       item["id"])
            return None
        nests = item.get("nests", True)
        if not isinstance(nests, bool):
            self.error("`nests` must be true or false", item.key_lines["nests"], item["id"])
            return None
        kind = self._kind(item, KINDS)
        if start is None or ("done" in item and done is None) or kind == "":
            return None
        return PhaseRule(id=item["id"], title=str(title), start=start, done=done,
                         stall_after=stall_after, advice=self._advice(item), origin=origin,
                         parent=parent, nests=nests, kind=kind)

    def _kind(self, item: YamlMapping, kinds: tuple[str, ...]) -> str | None:
        """The kind of place a phase is, or of trouble a signal says; a generic rule named
        after a kind is its own (another may declare one: serving is a server's main loop,
        as the training loop is a trainer's). "" after an error."""
        if self.generic and item["id"] in kinds:
            return str(item["id"])
        kind = item.get("kind")
        if kind is not None and kind not in kinds:
            self.error(f"`kind` must be one of {', '.join(kinds)}, not {kind!r}",
                       item.key_lines["kind"], item["id"])
            return ""
        return kind

    def _signals(self, item: YamlMapping, origin: Origin) -> SignalRule | None:
        pattern = self._regex(item, "match")
        severity = item.get("severity", "warning")
        if severity not in SEVERITIES:
            self.error(f"`severity` must be one of {', '.join(SEVERITIES)}, not {severity!r}",
                       item.key_lines["severity"], item["id"])
            return None
        kind = self._kind(item, SIGNAL_KINDS)
        if pattern is None or kind == "":
            return None
        return SignalRule(id=item["id"], match=pattern, severity=severity,
                          advice=self._advice(item), origin=origin, kind=kind)

    def _noise(self, item: YamlMapping, origin: Origin) -> NoiseRule | None:
        pattern = self._regex(item, "match")
        return None if pattern is None else NoiseRule(id=item["id"], match=pattern, origin=origin)

    def _finish(self, item: YamlMapping, origin: Origin) -> FinishRule | None:
        pattern = self._regex(item, "match")
        return None if pattern is None else FinishRule(id=item["id"], match=pattern, origin=origin)

    def _progress(self, item: YamlMapping, origin: Origin) -> ProgressRule | None:
        pattern = self._regex(item, "match")
        if pattern is None:
            return None
        counter = item.get("counter")
        heartbeat = item.get("heartbeat", False)
        groups = regex.compile(pattern).groupindex
        if counter is not None and counter not in groups:
            self.error(f"`counter: {counter}` names no group of the pattern "
                       f"(write (?P<{counter}>\\d+) in `match`)",
                       item.key_lines["counter"], item["id"])
            return None
        if not isinstance(heartbeat, bool):
            self.error("`heartbeat` must be true or false", item.key_lines["heartbeat"],
                       item["id"])
            return None
        if counter is None and not heartbeat:
            self.error("a progress rule needs `counter: GROUP` or `heartbeat: true`",
                       item.line, item["id"])
            return None
        return ProgressRule(id=item["id"], match=pattern, counter=counter, heartbeat=heartbeat,
                            origin=origin)

    def _ranks(self, item: YamlMapping, origin: Origin) -> RankRule | None:
        pattern = self._regex(item, "match")
        if pattern is None:
            return None
        if "rank" not in regex.compile(pattern).groupindex:
            self.error(f"`match` needs a named group `rank` (e.g. `\\[worker(?P<rank>\\d+)\\]`): "
                       f"{pattern!r}", item.key_lines["match"], item["id"])
            return None
        return RankRule(id=item["id"], match=pattern, origin=origin)

    def _diagnoses(self, item: YamlMapping, origin: Origin) -> DiagnosisRule | None:
        when = item["when"]
        if not isinstance(when, YamlMapping) or not when:
            self.error("`when` must be a mapping of conditions (e.g. `gpus: busy`)",
                       item.key_lines["when"], item["id"])
            return None
        conditions: list[tuple[str, tuple[str, ...]]] = []
        for key, value in when.items():
            values = value if isinstance(value, list) else [value]
            line = when.key_lines[str(key)]
            if key not in WHEN_KEYS:
                self.error(f"unknown condition {key!r} in `when` (known: "
                           f"{', '.join(WHEN_KEYS)})", line, item["id"])
                return None
            allowed = WHEN_KEYS[key]
            for v in values:
                if not isinstance(v, str):
                    self.error(f"condition {key!r} takes text, not {v!r}", line, item["id"])
                    return None
                if allowed is not None and v not in allowed:
                    self.error(f"condition {key!r} takes one of {', '.join(allowed)}, not {v!r}",
                               line, item["id"])
                    return None
                if key == "stack" and not self._check(v, line, item["id"], f"when.{key}"):
                    return None
            conditions.append((str(key), tuple(values)))
        return DiagnosisRule(id=item["id"], when=tuple(conditions), advice=self._advice(item),
                             origin=origin)

    def _checks(self, item: YamlMapping, origin: Origin) -> PackCheck | None:
        kinds = [k for k in ("env", "path") if k in item]
        if len(kinds) != 1:
            self.error("a check needs one of `env: NAME` (a variable that must be set) or "
                       "`path: PATH` (a path that must exist)", item.line, item["id"])
            return None
        kind = kinds[0]
        target, status, fix = item[kind], item.get("status", "fail"), item.get("fix", "")
        if not isinstance(target, str) or not target or (
                kind == "env" and not ENV_NAME_PATTERN.fullmatch(target)):
            what = "a variable name (e.g. HF_TOKEN)" if kind == "env" else "a path (text)"
            self.error(f"`{kind}` must be {what}, not {target!r}", item.key_lines[kind],
                       item["id"])
            return None
        if status not in ("fail", "warn"):
            self.error(f"`status` must be fail or warn, not {status!r}",
                       item.key_lines["status"], item["id"])
            return None
        if not isinstance(fix, str):
            self.error("`fix` must be text", item.key_lines["fix"], item["id"])
            return None
        return PackCheck(id=item["id"], kind=kind, target=target, status=status,
                         fix=fix.strip(), origin=origin)

    # --- shared value checks -------------------------------------------------------------

    def _regex(self, item: YamlMapping, key: str) -> str | None:
        """`key`'s pattern: a regular expression, or a non-empty list of them joined as
        `(?:a)|(?:b)|...` (one alternative an item, each checked on its own line)."""
        value = item.get(key)
        line = item.key_lines.get(key, item.line)
        rule = str(item.get("id", ""))
        if isinstance(value, list) and value:
            return self._alternatives(value, item.item_lines.get(key, []), line, rule, key)
        if not isinstance(value, str) or not value:
            self.error(f"`{key}` must be a regular expression (text) or a non-empty list of "
                       f"them", line, rule)
            return None
        return value if self._check(value, line, rule, key) else None

    def _alternatives(self, items: list[Any], lines: list[int], line: int, rule: str,
                      key: str) -> str | None:
        ok = True
        for n, value in enumerate(items):
            before = len(self.errors)
            if not isinstance(value, str) or not value:
                self.error(f"item {n + 1} of `{key}` must be a regular expression (text), not "
                           f"{value!r}", line, rule)
            else:
                self._check(value, line, rule, key, item=n + 1)
            if len(self.errors) > before:  # found on the key's line: name the item's own
                ok = False
                at = lines[n] if n < len(lines) else line
                self.errors[before:] = [ConfigError(e.message, file=e.file, line=at, rule=e.rule)
                                        for e in self.errors[before:]]
        if not ok:
            return None
        # Inline flags such as (?i) hold inside their group, so each alternative keeps its own.
        joined = "|".join(f"(?:{v})" for v in items)
        if self.builtin:
            return joined
        try:
            regex.compile(joined)
        except regex.error as exc:  # e.g. a numbered back-reference across items
            self.error(f"the items of `{key}` do not join into one pattern: {exc.msg}", line, rule)
            return None
        return joined

    def _check(self, pattern: str, line: int, rule: str, key: str, item: int = 0) -> bool:
        """Whether `pattern` is admitted, with the error reported if not (`item`: its place in
        a list). A built-in pack's patterns are not compiled here: the suite compiles every
        one (tests/test_packs.py), and a start then compiles only those its log
        needs (`core/rules.Compiled`)."""
        where = f"`{key}`" + (f" (item {item})" if item else "")
        self.patterns += 1
        if self.patterns == MAX_PATTERNS + 1:
            self.error(f"more than {MAX_PATTERNS} patterns in one file: split it, or merge "
                       f"rules", line, rule)
        if self.patterns > MAX_PATTERNS:
            return False
        if len(pattern) > MAX_PATTERN_CHARS:
            self.error(f"pattern in {where} is {len(pattern)} characters long, more than "
                       f"{MAX_PATTERN_CHARS}: {pattern[:60]!r}...", line, rule)
            return False
        if self.builtin:
            return True
        try:
            regex.compile(pattern)
        except regex.error as exc:
            pos = f" at position {exc.pos}" if exc.pos is not None else ""
            self.error(f"bad regex in {where}: {exc.msg}{pos}: {pattern!r}", line, rule)
            return False
        return True

    def _advice(self, item: YamlMapping) -> tuple[str, ...]:
        return tuple(s.strip() for s in self._string_list(item, "advice", item.line,
                                                           item.get("id", "")))

    def _string_list(self, doc: YamlMapping, key: str, line: int, rule: str) -> list[str]:
        value = doc.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(f"`{key}` must be a list of text", doc.key_lines.get(key, line), rule)
            return []
        return list(value)

