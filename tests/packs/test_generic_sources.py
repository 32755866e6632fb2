"""The generic layer's words taken from frameworks' source: each cited string is named by the
rule it is cited under (as fail2ban ships sample lines with every filter)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_builtin_packs

GENERIC = Path(__file__).resolve().parents[2] / "rules" / "generic.yaml"
RULE = re.compile(r"^  - id: (\w+)")
SECTION = re.compile(r"^(\w+):")
# `# <owner>/<repo> <path> [<function>]: "<the string>" ...`, in a `start:` or `match:` list
CITATION = re.compile(r'^ {6}# (?P<repo>[\w.-]+/[\w.-]+) (?P<path>[^\s:]+)[^\n"]*?: '
                      r'(?P<rest>.*".*)$')
CONTINUED = " " * 6 + "# "
QUOTED = re.compile(r'"((?:[^"\\]|\\.)+)"')
# what the job prints where the source has a value: f-string fields, printf conversions
VALUE = re.compile(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrfi]")


@dataclass(frozen=True)
class Citation:
    line: int
    section: str
    rule: str
    text: str

    def printed(self) -> list[str]:
        return [VALUE.sub("7", s) for s in QUOTED.findall(self.text)]


def citations() -> list[Citation]:
    """Each citation, with the comment lines that continue it (a string quoted over two)."""
    out: list[Citation] = []
    section = rule = ""
    open_ = False  # the comment lines read so far continue the last citation
    for number, line in enumerate(GENERIC.read_text(encoding="utf-8").splitlines(), 1):
        if m := SECTION.match(line):
            section = m.group(1)
        elif m := RULE.match(line):
            rule = m.group(1)
        if (m := CITATION.match(line)) and section in ("phases", "signals"):
            out.append(Citation(number, section, rule, m.group("rest")))
            open_ = True
        elif open_ and line.startswith(CONTINUED):
            last = out[-1]
            out[-1] = Citation(last.line, last.section, last.rule,
                               f"{last.text} {line[len(CONTINUED):]}")
        else:
            open_ = False
    return out


@pytest.fixture(scope="module")
def generic() -> RuleSet:
    return RuleSet([p for p in load_builtin_packs() if p.generic])


def test_the_generic_layer_cites_its_sources():
    found = citations()
    assert len(found) >= 40
    assert {c.rule for c in found} >= {"train_loop", "data_load", "model_load", "build",
                                       "distributed_init", "resource_wait", "evaluation",
                                       "checkpoint_save", "shutdown"}


@pytest.mark.parametrize("citation", citations(), ids=lambda c: f"line{c.line}")
def test_a_cited_string_is_named_by_the_rule_it_is_cited_under(citation: Citation,
                                                              generic: RuleSet):
    named: list[list[str]] = []
    for text in citation.printed():
        match = generic.match(text)
        hits = [] if match is None else [
            r.id for r in (match.phase_starts if citation.section == "phases"
                           else match.signals)]
        if f"generic:{citation.rule}" in hits:
            return
        named.append(hits)
    pytest.fail(f"rules/generic.yaml:{citation.line}: none of {citation.printed()} is named "
                f"generic:{citation.rule} (named: {named})")
