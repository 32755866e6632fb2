"""Load rule packs from YAML into validated plain data, reporting every problem with its place."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex
import yaml

from hangwatch.core.durations import parse_duration
from hangwatch.core.evidence import WHEN_KEYS
from hangwatch.core.model import (
    SEVERITIES,
    DiagnosisRule,
    FinishRule,
    NoiseRule,
    Origin,
    PhaseRule,
    ProgressRule,
    RankRule,
    RulePack,
    SignalRule,
)
from hangwatch.core.rules import RuleSet
from hangwatch.errors import ConfigError, ConfigErrors

PACK_KEYS = {"pack", "description", "extends", "layer", "phases", "signals", "noise",
             "progress", "finish", "diagnoses", "checks", "ranks"}
LAYERS = ("pack", "generic")
GENERIC_PREFIX = "generic:"  # generic-layer ids are shown, and kept apart, as generic:<id>
SECTION_KEYS: dict[str, tuple[set[str], set[str]]] = {
    # section: (required keys, optional keys)
    "phases": ({"id", "start"}, {"title", "done", "stall_after", "advice", "parent", "nests"}),
    "signals": ({"id", "match"}, {"severity", "advice"}),
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
MAX_FILE_BYTES = 1 << 20
MAX_VALUES = 100_000  # scalars, lists and mappings, counting each alias as what it repeats
MAX_PATTERN_CHARS = 2000
MAX_PATTERNS = 10_000  # regular expressions in one file: generated per-step packs run to thousands
ID_PATTERN = regex.compile(r"[a-z][a-z0-9_]*")
PACK_NAME_PATTERN = regex.compile(r"[a-z][a-z0-9_.-]*")
ENV_NAME_PATTERN = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class PackCheck:
    """A preflight check from a pack's `checks:` (run by `hangwatch doctor`): an environment
    variable that must be set, or a path that must exist."""

    id: str
    kind: str  # "env" or "path"
    target: str
    status: str  # what a miss is: "fail" or "warn"
    fix: str
    origin: Origin


class _Mapping(dict[Any, Any]):
    """A YAML mapping that remembers the line of itself and of each key."""

    line: int = 0
    key_lines: dict[str, int]


# libyaml's parser, where PyYAML was built with it, reads the packs about 4x faster.
_SafeLoader = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


class _LineLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> _Mapping:
        mapping = _Mapping()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
            mapping.key_lines[str(key)] = key_node.start_mark.line + 1
        return mapping


_LineLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _LineLoader.construct_mapping
)


def builtin_rules_dir() -> Path:
    """The packs shipped inside the wheel, else the checkout's top-level rules/ (source runs)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "rules", here.parent / "rules"):
        if candidate.is_dir():
            return candidate
    return here / "rules"


def rule_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not path.exists():
        raise ConfigError("no such rule file or folder", file=str(path))
    return [path]


def load_builtin_packs() -> list[RulePack]:
    return [load_pack_file(p, builtin=True) for p in rule_files(builtin_rules_dir())]


def load_pack_file(path: Path, *, builtin: bool = False) -> RulePack:
    """Parse and validate one file; raise ConfigErrors listing every problem in it."""
    name = str(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigErrors([ConfigError(f"cannot read: {exc}", file=name)]) from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigErrors([ConfigError(f"larger than {MAX_FILE_BYTES // 1024} KiB: not a rule "
                                        f"pack", file=name)])
    return load_pack_text(text, name, builtin=builtin)


YamlMapping = _Mapping


def parse_yaml(text: str, name: str) -> Any:
    """YAML whose mappings are YamlMappings (they know their lines); a syntax error or a
    duplicate key raises ConfigErrors naming `name` and the line."""
    try:
        doc = yaml.load(text, Loader=_LineLoader)  # safe: a SafeLoader with line numbers
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else 0
        raise ConfigErrors(
            [ConfigError(f"invalid YAML: {exc.problem or exc}", file=name, line=line)]
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigErrors([ConfigError(f"invalid YAML: {exc}", file=name)]) from None
    _refuse_alias_bomb(doc, name)
    return doc


def load_pack_text(text: str, name: str, *, builtin: bool = False) -> RulePack:
    return _parse_pack(text, name, builtin)[0]


def _parse_pack(text: str, name: str, builtin: bool) -> tuple[RulePack, tuple[PackCheck, ...]]:
    doc = parse_yaml(text, name)
    errors: list[ConfigError] = []
    parser = _PackParser(name, errors, builtin)
    pack = parser.parse(doc)
    if errors or pack is None:
        raise ConfigErrors(errors)
    return pack, parser.checks


def _refuse_alias_bomb(doc: Any, name: str) -> None:
    """Aliases make a small file stand for a huge document ("billion laughs"). The loader
    shares what an alias repeats, so loading is cheap; anything that walked the document
    (validation, error messages) would not be. Count values as a walk would see them, and
    stop at MAX_VALUES."""
    budget = [MAX_VALUES]

    def walk(value: Any) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError
        if isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    top = doc.items() if isinstance(doc, _Mapping) else [("", doc)]
    for key, value in top:
        try:
            walk(value)
        except (OverflowError, RecursionError):
            line = doc.key_lines.get(str(key), 1) if isinstance(doc, _Mapping) else 1
            raise ConfigErrors([ConfigError(
                f"`{key}` expands to more than {MAX_VALUES} values through YAML aliases "
                f"(*name): refused", file=name, line=line)]) from None


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
        if not isinstance(doc, _Mapping):
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
        for section in ("noise", "finish"):
            if self.generic and section in doc:
                self.error(f"the generic layer names phases and signals; `{section}` belongs "
                           f"in a pack", doc.key_lines[section])
        seen: dict[str, int] = {}
        sections = {
            section: [r for r in self._section(doc, section, seen) if r is not None]
            for section in SECTION_KEYS
        }
        self.checks = tuple(sections["checks"])
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
        )

    def _section(self, doc: _Mapping, section: str, seen: dict[str, int]) -> Iterator[Any]:
        items = doc.get(section)
        if items is None:
            return
        if not isinstance(items, list):
            self.error(f"`{section}` must be a list", doc.key_lines[section])
            return
        required, optional = SECTION_KEYS[section]
        for item in items:
            if not isinstance(item, _Mapping):
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

    def _phases(self, item: _Mapping, origin: Origin) -> PhaseRule | None:
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
        if start is None or ("done" in item and done is None):
            return None
        return PhaseRule(id=item["id"], title=str(title), start=start, done=done,
                         stall_after=stall_after, advice=self._advice(item), origin=origin,
                         parent=parent, nests=nests)

    def _signals(self, item: _Mapping, origin: Origin) -> SignalRule | None:
        pattern = self._regex(item, "match")
        severity = item.get("severity", "warning")
        if severity not in SEVERITIES:
            self.error(f"`severity` must be one of {', '.join(SEVERITIES)}, not {severity!r}",
                       item.key_lines["severity"], item["id"])
            return None
        if pattern is None:
            return None
        return SignalRule(id=item["id"], match=pattern, severity=severity,
                          advice=self._advice(item), origin=origin)

    def _noise(self, item: _Mapping, origin: Origin) -> NoiseRule | None:
        pattern = self._regex(item, "match")
        return None if pattern is None else NoiseRule(id=item["id"], match=pattern, origin=origin)

    def _finish(self, item: _Mapping, origin: Origin) -> FinishRule | None:
        pattern = self._regex(item, "match")
        return None if pattern is None else FinishRule(id=item["id"], match=pattern, origin=origin)

    def _progress(self, item: _Mapping, origin: Origin) -> ProgressRule | None:
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

    def _ranks(self, item: _Mapping, origin: Origin) -> RankRule | None:
        pattern = self._regex(item, "match")
        if pattern is None:
            return None
        if "rank" not in regex.compile(pattern).groupindex:
            self.error(f"`match` needs a named group `rank` (e.g. `\\[worker(?P<rank>\\d+)\\]`): "
                       f"{pattern!r}", item.key_lines["match"], item["id"])
            return None
        return RankRule(id=item["id"], match=pattern, origin=origin)

    def _diagnoses(self, item: _Mapping, origin: Origin) -> DiagnosisRule | None:
        when = item["when"]
        if not isinstance(when, _Mapping) or not when:
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
                if key == "stack" and self._compile(v, line, item["id"], f"when.{key}") is None:
                    return None
            conditions.append((str(key), tuple(values)))
        return DiagnosisRule(id=item["id"], when=tuple(conditions), advice=self._advice(item),
                             origin=origin)

    def _checks(self, item: _Mapping, origin: Origin) -> PackCheck | None:
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

    def _regex(self, item: _Mapping, key: str) -> str | None:
        value = item.get(key)
        line = item.key_lines.get(key, item.line)
        if not isinstance(value, str) or not value:
            self.error(f"`{key}` must be a regular expression (text)", line, item.get("id", ""))
            return None
        return value if self._compile(value, line, str(item["id"]), key) is not None else None

    def _compile(self, pattern: str, line: int, rule: str, key: str) -> regex.Pattern[str] | None:
        self.patterns += 1
        if self.patterns == MAX_PATTERNS + 1:
            self.error(f"more than {MAX_PATTERNS} patterns in one file: split it, or merge "
                       f"rules", line, rule)
        if self.patterns > MAX_PATTERNS:
            return None
        if len(pattern) > MAX_PATTERN_CHARS:
            self.error(f"pattern in `{key}` is {len(pattern)} characters long, more than "
                       f"{MAX_PATTERN_CHARS}: {pattern[:60]!r}...", line, rule)
            return None
        try:
            return regex.compile(pattern)
        except regex.error as exc:
            pos = f" at position {exc.pos}" if exc.pos is not None else ""
            self.error(f"bad regex in `{key}`: {exc.msg}{pos}: {pattern!r}", line, rule)
            return None

    def _advice(self, item: _Mapping) -> tuple[str, ...]:
        return tuple(s.strip() for s in self._string_list(item, "advice", item.line,
                                                           item.get("id", "")))

    def _string_list(self, doc: _Mapping, key: str, line: int, rule: str) -> list[str]:
        value = doc.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.error(f"`{key}` must be a list of text", doc.key_lines.get(key, line), rule)
            return []
        return list(value)


def load_user_packs(paths: Iterable[Path]) -> list[RulePack]:
    """Load `--rules` files and folders, collecting the errors of all files before raising."""
    packs: list[RulePack] = []
    errors: list[ConfigError] = []
    for path in paths:
        try:
            files = rule_files(path)
        except ConfigError as exc:
            errors.append(exc)
            continue
        for file in files:
            try:
                packs.append(load_pack_file(file))
            except ConfigErrors as exc:
                errors.extend(exc.errors)
    if errors:
        raise ConfigErrors(errors)
    return packs


def load_pack_checks(extra: Iterable[str | Path] = ()) -> list[PackCheck]:
    """The `checks:` of the built-in packs and of the user's `--rules` files and folders."""
    checks: list[PackCheck] = []
    errors: list[ConfigError] = []
    files = [(p, True) for p in rule_files(builtin_rules_dir())]
    for path in (Path(p) for p in extra):
        try:
            files += [(f, False) for f in rule_files(path)]
        except ConfigError as exc:
            errors.append(exc)
    for file, builtin in files:
        try:
            checks += _parse_pack(file.read_text(encoding="utf-8"), str(file), builtin)[1]
        except ConfigErrors as exc:
            errors.extend(exc.errors)
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(ConfigError(f"cannot read: {exc}", file=str(file)))
    if errors:
        raise ConfigErrors(errors)
    return checks


def load_rule_set(extra: Iterable[str | Path] = ()) -> RuleSet:
    """The built-in packs plus the user's `--rules` files and folders, merged and compiled."""
    return RuleSet([*load_builtin_packs(), *load_user_packs(Path(p) for p in extra)])
