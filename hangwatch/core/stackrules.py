"""Where a frame says a process is: `stacks:` rules map frame patterns to a phase and a label.

A rule's `match` is a regular expression searched in the frame's `function (file)` text, the
form stacks are normalised to (`all_reduce (torch/distributed/distributed_c10d.py)`). Its
`phase` is one of the generic layer's phase ids where one fits (`data_load`, `model_load`,
`checkpoint_save`, `distributed_init`, ...), or a place of its own (`collective`); its
`label` is the words a sentence uses ("data loading").

`parse_stack_rules` validates the list a rule file's `stacks:` key holds, as loaded by the
pack loader (mappings that know their lines), and answers every problem with its place.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hangwatch.errors import ConfigError

REQUIRED = frozenset({"id", "match", "label"})
OPTIONAL = frozenset({"phase", "guess"})
_ID = re.compile(r"[a-z][a-z0-9_]*")
MAX_PATTERN_CHARS = 2000
# Places where a process waits for its peers: one there is waiting for whoever is not.
PEER_WAIT_PHASES = frozenset({"collective"})
# Places where a process waits on others (its peers, or remote tasks a driver handed out): what it
# waits for is said by the frame that called the wait (`ray.get` inside a weight sync).
CALLER_NAMED_PHASES = PEER_WAIT_PHASES | {"remote_wait"}


@dataclass(frozen=True)
class StackRule:
    id: str
    pattern: str
    phase: str | None
    label: str
    file: str = ""
    line: int = 0
    # A guess from a file's name (a training script's frames): it names a stack no other
    # rule names, never the place a peer wait in it was called from.
    guess: bool = False

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def matches(self, frame_text: str) -> bool:
        return self.compiled.search(frame_text) is not None


def rule_for(frame_text: str, rules: Sequence[StackRule]) -> StackRule | None:
    """The first rule (in file order) whose pattern is found in the frame."""
    return next((rule for rule in rules if rule.matches(frame_text)), None)


def parse_stack_rules(items: Any, file: str, line: int = 0
                      ) -> tuple[list[StackRule], list[ConfigError]]:
    """(rules, every problem found): `items` is the value of a `stacks:` key; each mapping may
    carry `line` and `key_lines` (the pack loader's YAML mappings do) for the messages."""
    if not isinstance(items, list):
        return [], [ConfigError("`stacks` must be a list of rules (id, match, label, phase)",
                                file=file, line=line)]
    rules: list[StackRule] = []
    errors: list[ConfigError] = []
    seen: dict[str, int] = {}
    for item in items:
        rule = _parse_one(item, file, line, seen, errors)
        if rule is not None:
            rules.append(rule)
    return rules, errors


def _parse_one(item: Any, file: str, line: int, seen: dict[str, int],
               errors: list[ConfigError]) -> StackRule | None:
    if not isinstance(item, dict):
        errors.append(ConfigError("each entry of `stacks` must be a mapping with an `id`",
                                  file=file, line=line))
        return None
    at = getattr(item, "line", line)
    key_lines: dict[str, int] = getattr(item, "key_lines", {})
    rule_id = item.get("id")
    label = str(rule_id) if rule_id is not None else ""
    before = len(errors)

    def error(message: str, key: str | None = None) -> None:
        errors.append(ConfigError(message, file=file, line=key_lines.get(key or "", at),
                                  rule=label))

    for key in item:
        if key not in REQUIRED | OPTIONAL:
            error(f"unknown key {key!r} in stacks (known: "
                  f"{', '.join(sorted(REQUIRED | OPTIONAL))})", str(key))
    for key in sorted(REQUIRED - set(item)):
        error(f"missing required key {key!r} in stacks")
    if rule_id is not None and not (isinstance(rule_id, str) and _ID.fullmatch(rule_id)):
        error("`id` must be lower case letters, digits and _ (e.g. torch_collective)", "id")
    elif isinstance(rule_id, str):
        if rule_id in seen:
            error(f"duplicate id {rule_id!r} (first at line {seen[rule_id]})", "id")
        seen.setdefault(rule_id, key_lines.get("id", at))
    pattern, phase, words = item.get("match"), item.get("phase"), item.get("label")
    if "match" in item:
        _check_pattern(pattern, error)
    if phase is not None and not (isinstance(phase, str) and _ID.fullmatch(phase)):
        error("`phase` must be a phase id (lower case, e.g. data_load)", "phase")
    if "label" in item and not (isinstance(words, str) and words.strip()):
        error("`label` must be a few words (e.g. data loading)", "label")
    guess = item.get("guess", False)
    if not isinstance(guess, bool):
        error("`guess` must be true or false", "guess")
    if len(errors) > before:
        return None
    return StackRule(id=str(rule_id), pattern=str(pattern), phase=phase,
                     label=str(words).strip(), file=file, line=at, guess=guess)


def _check_pattern(pattern: Any, error: Any) -> None:
    if not isinstance(pattern, str) or not pattern:
        error("`match` must be a regular expression (text)", "match")
        return
    if len(pattern) > MAX_PATTERN_CHARS:
        error(f"pattern in `match` is {len(pattern)} characters long, more than "
              f"{MAX_PATTERN_CHARS}: {pattern[:60]!r}...", "match")
        return
    try:
        re.compile(pattern)
    except re.error as exc:
        position = f" at position {exc.pos}" if exc.pos is not None else ""
        error(f"bad regex in `match`: {exc.msg}{position}: {pattern!r}", "match")
