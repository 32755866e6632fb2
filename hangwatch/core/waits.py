"""Tell a wait loop from progress on lines no rule knows.

A job stuck waiting often keeps printing: `still waiting for rank 3 (attempt 14)`, a
rendezvous store's debug trace polling for a key, an identical heartbeat every second. Each
such line is output, not progress. The detector keeps, per source, a short window of the
lines it judged, as templates (numbers masked, the idea of Drain's log templates): a line is
a *repeat* when a line of the same template was judged within the last `WINDOW_LINES` lines
and, compared with it,

* nothing changed but time-like numbers (timestamps, `12.5s`, `elapsed: 630`, rates), or
* the line speaks of waiting (waiting, retry, pending, attempt, polling, ...) and no counter
  of work (step, iteration, batch, epoch, examples, tokens) advanced.

Anything else is progress, the first line of a template included. Numbers that name who
speaks (`pid=12`, `rank 3`, an IP address) are part of the template, so two actors printing
the same wait line are told apart.

Only lines judged go into the window; the engine judges a block's lines until one is
progress (later lines of that block could not change when its progress happened), and does
so the same way whether it reads line by line or through the prefilter, so both ways give
the same events.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal, NamedTuple

import regex

WINDOW_LINES = 512  # a template repeats "in a short cycle" when seen within this many lines
WINDOW_SIZE = 32  # distinct recent lines kept per source
WAITS_KEPT = 16  # wait templates kept for the stall report

_STAMP = regex.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    r"|\b[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+"  # glog
    r"|\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b"
    r"|\[\d\d:\d\d(?::\d\d)?<[^\]]*\]"  # tqdm's [elapsed<remaining, rate]
)
# One token: an IPv4 address (who speaks), a hex id, or a number with what stands before it.
_NUMBER = regex.compile(
    r"(?P<ip>\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b)"
    r"|(?P<hex>\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b)"
    r"|(?P<num>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
)
_IDENTITY_BEFORE = regex.compile(
    r"(?i)(?:\bpid|\btid|\brank|\bip|\bnode|\bworker|\bgpu|\bdevice|\bcuda:|\btp|\bdefault|"
    r"\bhost|\btask|\bprocess)[\s=:#\[]*$")
_COUNTER_BEFORE = regex.compile(
    r"(?i)(?:\bstep|\biter(?:ation)?|\bbatch|\bepoch|\bexamples?|\btokens?|\bsamples?|"
    r"\bshard|\bchunk|\bfile|\bpart)s?[\s=:#\[]*$")
_TIME_BEFORE = regex.compile(r"(?i)(?:\belapsed|\buptime|\bwaited|\bfor the last|\bafter)\W{0,3}$")
_TIME_AFTER = regex.compile(
    r"(?i)^\s?(?:ms|us|µs|s|sec|secs|seconds?|m|mins?|minutes?|h|hrs?|hours?)\b|^\s?\w*/s\b")
_WAITING = regex.compile(
    r"(?i)\b(?:wait(?:s|ing|ed)?|retr(?:y|ying|ies)|still|pending|not (?:yet )?(?:ready|"
    r"available|joined|connected)|unavailable|no available|heartbeat|attempt|poll(?:s|ing)?|"
    r"sleep(?:s|ing)?|back(?:ing )?off|blocked|queued|stuck|idle)\b")

Kind = Literal["time", "counter", "value"]


class Template(NamedTuple):
    key: str  # numbers masked, those naming who speaks kept
    shown: str  # every number masked: what the report quotes
    values: tuple[tuple[Kind, str], ...]  # the masked numbers, in order
    waiting: bool  # speaks of waiting


def template(text: str) -> Template:
    """The line as a template and its numbers."""
    text = _STAMP.sub("<t>", text.rstrip("\r\n"))
    key: list[str] = []
    shown: list[str] = []
    values: list[tuple[Kind, str]] = []
    pos = 0
    for found in _NUMBER.finditer(text):
        before = text[pos:found.start()]
        key.append(before)
        shown.append(before)
        pos = found.end()
        head = text[max(0, found.start() - 24):found.start()]
        if found.group("ip") or _IDENTITY_BEFORE.search(head):
            key.append(found.group())
            shown.append("<n>")
            continue
        mask = "<x>" if found.group("hex") else "<n>"
        key.append(mask)
        shown.append(mask)
        values.append((_kind(head, text[pos:pos + 12]), found.group()))
    key.append(text[pos:])
    shown.append(text[pos:])
    joined = "".join(key)
    return Template(joined, "".join(shown).strip(), tuple(values),
                    _WAITING.search(joined) is not None)


def _kind(before: str, after: str) -> Kind:
    if _TIME_AFTER.search(after) or _TIME_BEFORE.search(before):
        return "time"
    if _COUNTER_BEFORE.search(before):
        return "counter"
    return "value"


@dataclass(frozen=True)
class Verdict:
    progress: bool
    why: str  # "new", "advanced", "identical", "time only", "waiting, no counter advanced"


@dataclass
class WaitRecord:
    """A template judged a repeat since the last progress: how often, and over what time."""

    shown: str
    why: str
    count: int
    first_s: float  # monotonic
    last_s: float
    last_text: str

    def to_dict(self) -> dict[str, object]:
        return {"template": self.shown, "why": self.why, "count": self.count,
                "span_s": round(self.last_s - self.first_s, 3), "last": self.last_text}


class _Seen(NamedTuple):
    line: int
    template: Template


class WaitDetector:
    """Per-source windows of judged lines, and the repeats seen since the last progress."""

    def __init__(self) -> None:
        self._windows: dict[str, deque[_Seen]] = {}
        self._waits: dict[str, WaitRecord] = {}

    def judge(self, source: str, line: int, text: str, now: float) -> Verdict:
        """Is `text`, line `line` of `source`, progress? It joins the window either way."""
        current = template(text)
        window = self._windows.setdefault(source, deque(maxlen=WINDOW_SIZE))
        verdict = _compare(current, _last_like(window, current.key, line))
        window.append(_Seen(line, current))
        if not verdict.progress:
            self._record(current, verdict.why, text, now)
        return verdict

    def progressed(self) -> None:
        """Real progress: the repeats before it no longer explain anything."""
        self._waits.clear()

    def waits(self) -> list[WaitRecord]:
        """Repeats since the last progress, the most frequent first."""
        return sorted(self._waits.values(), key=lambda w: (-w.count, w.first_s))

    def _record(self, current: Template, why: str, text: str, now: float) -> None:
        record = self._waits.get(current.key)
        if record is None:
            if len(self._waits) >= WAITS_KEPT:
                return
            record = self._waits[current.key] = WaitRecord(current.shown, why, 1, now, now,
                                                           text.strip()[:200])
            return
        record.count += 1
        record.last_s = now
        record.why = why
        record.last_text = text.strip()[:200]


def _last_like(window: deque[_Seen], key: str, line: int) -> Template | None:
    for seen in reversed(window):
        if line - seen.line > WINDOW_LINES:
            return None
        if seen.template.key == key:
            return seen.template
    return None


def _compare(current: Template, previous: Template | None) -> Verdict:
    if previous is None:
        return Verdict(True, "new")
    changed = [kind for (kind, value), (_, before) in zip(current.values, previous.values,
                                                          strict=False) if value != before]
    if not changed:
        return Verdict(False, "identical")
    if all(kind == "time" for kind in changed):
        return Verdict(False, "only a time changed")
    if current.waiting and "counter" not in changed:
        return Verdict(False, "waiting; no counter advanced")
    return Verdict(True, "advanced")
