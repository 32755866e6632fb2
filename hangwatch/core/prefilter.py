"""Find, in a whole block of lines at once, the few lines a rule may hit.

Matching every rule against every line costs tens of microseconds a line in Python, and a
job with `NCCL_DEBUG=INFO` writes millions of lines. Hyperscan (the optional
`hangwatch[fast]` extra) scans a block for all rule patterns in one pass and reports where
each match ends; only the lines it names reach Python. What the engine learns must not
change, so:

* Each pattern is translated, not handed over (`translate`). In its *strict* form, used on
  lines of pure ASCII, every one-character atom (a literal, `.`, `\\w`, a class, under the
  rule's flags) becomes the exact set of ASCII bytes Python's `regex` accepts for it, never
  `\\n`: a match cannot leave its line, and `^ $ \\b` see a line's edges as on a line
  alone. Built only of such atoms a form is *exact*: Hyperscan's answer is the rule's.
  Constructs Hyperscan lacks (lookarounds, back-references, fuzzy matching, recursion) are
  widened to what contains them, and `regex` confirms the lines found. The *loose* form, for
  lines with other bytes, lets an atom match any non-ASCII character too: a superset again,
  confirmed by `regex`.
* Exact noise rules are not scanned for: a line that only noise hits is merely counted, and
  a plain line matters only as the block's first (it is progress, and ends a stall). So the
  first line nothing hits is looked for line by line from the block's start, and all noise
  lines are found in one scan only when a long run of them (NCCL spew) makes it worthwhile.

Flags the translation cannot follow (verbose, full case folding, version 1 sets) make
`try_build` return None, and the engine matches line by line.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from hangwatch.core import rules as rules_module
from hangwatch.core.rules import LineMatch, RuleSet

# Flags whose effect this translation follows: i through atoms; a/u change \w only for
# characters outside ASCII (handled by the loose form); m and s change nothing on one line.
KNOWN_FLAGS = frozenset("imsau")
WIDE = r"[^\n]*"  # stands for any construct that matches some part of one line
EVERY_LINE = r"[^\n]*\n"  # to the end of a line: stands for a pattern Hyperscan refuses
HIGH = r"[\x80-\xff]{1,4}"  # one character outside ASCII, or one undecodable byte
ESCAPE_ATOMS = frozenset("dDwWsStnrfvaxuUNpP0")
# `(`, `(?:`, `(?P<name>`, `(?<name>`, `(?|`, or inline flags; anything else is special
# (lookarounds, comments, conditionals, `(?R)` and other recursion).
GROUP_HEAD = regex.compile(
    r"\((?!\?)|\(\?(?:P?<(?![=!])\w+>|:|\||(?P<on>(?:V\d|[a-zA-QS-Z])*)(?:-(?P<off>[a-zA-Z]*))?"
    r"(?P<close>[:)]))"
)
QUANTIFIER = regex.compile(r"[*+?]|\{(?P<low>\d*)(?:(?P<comma>,)(?P<high>\d*))?\}")
FUZZY = regex.compile(r"\{[^}]*[edis][^}]*\}")


class Untranslatable(ValueError):
    """The pattern's meaning depends on something the translation cannot follow."""


@dataclass(frozen=True)
class Translation:
    strict: str
    loose: str
    exact: bool
    nullable: bool  # it can match the empty string (through anchors or optional items)


@dataclass
class _Piece:
    """One item of a branch in both forms; `low` is the least repeat count when quantified."""

    strict: str
    loose: str
    zero_width: bool = False
    low: int | None = None
    quant: str = ""
    nullable: bool = False

    def __post_init__(self) -> None:
        self.nullable = self.nullable or self.zero_width or self.low == 0

    def render(self, loose: bool) -> str:
        text = self.loose if loose else self.strict
        return f"(?:{text}){self.quant}" if self.quant else text


def translate(pattern: str, *, anchors: bool = True) -> Translation:
    """The pattern's forms; `anchors=False` drops `^ $ \\A \\Z` (a superset Hyperscan takes
    where it refuses an anchor after other items, as in `x(?:^a)`)."""
    return _Translator(pattern, anchors).run()


class _Translator:
    def __init__(self, pattern: str, anchors: bool) -> None:
        self.p = pattern
        self.i = 0
        self.exact = True
        self.anchors = anchors

    def run(self) -> Translation:
        branches = self.branches(frozenset())
        if self.i < len(self.p):
            raise Untranslatable(f"unbalanced ')' at position {self.i}")
        for branch in branches:
            _trim(branch)
        return Translation(_join(branches, False), _join(branches, True), self.exact,
                           _nullable(branches))

    def peek(self, n: int = 1) -> str:
        return self.p[self.i:self.i + n]

    def branches(self, flags: frozenset[str]) -> list[list[_Piece]]:
        """Branches up to a ')' or the end; an inline `(?i)` carries into later branches."""
        out: list[list[_Piece]] = [[]]
        while self.i < len(self.p) and self.peek() != ")":
            if self.peek() == "|":
                self.i += 1
                out.append([])
                continue
            piece, flags = self.item(flags)
            if piece is not None:
                out[-1].append(self.quantifier(piece))
        return out

    def item(self, flags: frozenset[str]) -> tuple[_Piece | None, frozenset[str]]:
        """One item of a branch, or None for an inline flag setting."""
        c = self.peek()
        if c == "(":
            return self.group(flags)
        if c == "[":
            return self.atom(self.class_end(self.i), flags), flags
        if c in "^$":
            self.i += 1
            return self.anchor(c), flags
        if c == "\\":
            return self.escape(flags), flags
        if c in "*+?":
            raise Untranslatable(f"nothing to repeat at position {self.i}")
        return self.atom(self.i + 1, flags), flags

    def escape(self, flags: frozenset[str]) -> _Piece:
        c = self.p[self.i + 1:self.i + 2]
        if c in ("A", "Z"):
            self.i += 2
            return self.anchor("^" if c == "A" else "$")
        if c in ("b", "B"):
            self.i += 2
            return _Piece("\\" + c, "", True)  # next to a non-ASCII character: unknown
        if (c.isdigit() and c != "0") or c in ("g", "G", "K", "m", "M", "X", "L"):
            return self.widen(self.escape_end(self.i))  # back-reference, word edge, list...
        if c.isalnum() and c not in ESCAPE_ATOMS:
            raise Untranslatable(f"unknown escape \\{c}")
        return self.atom(self.escape_end(self.i), flags)

    def anchor(self, c: str) -> _Piece:
        if self.anchors:
            return _Piece(c, c, zero_width=True)
        self.exact = False
        return _Piece("", "", zero_width=True)

    def escape_end(self, i: int) -> int:
        c = self.p[i + 1:i + 2]
        if not c:
            raise Untranslatable("pattern ends with a backslash")
        if c in "pPNxgL" and self.p[i + 2:i + 3] in ("{", "<"):
            close = self.p.find("}" if self.p[i + 2] == "{" else ">", i + 3)
            if close < 0:
                raise Untranslatable(f"unterminated \\{c} at position {i}")
            return close + 1
        if c.isdigit():
            j = i + 2
            while j < min(len(self.p), i + 4) and self.p[j].isdigit():
                j += 1
            return j
        return i + 2 + {"x": 2, "u": 4, "U": 8, "p": 1, "P": 1}.get(c, 0)

    def class_end(self, i: int) -> int:
        """Index after the `]` that closes the class opened at `i` (regex version 0 rules)."""
        j = i + 1
        if self.p[j:j + 1] == "^":
            j += 1
        if self.p[j:j + 1] == "]":
            j += 1  # a `]` first in a class is a literal
        while j < len(self.p):
            c = self.p[j]
            if c == "\\":
                j += 2
            elif c == "[" and self.p[j + 1:j + 2] == ":" and ":]" in self.p[j + 2:]:
                j = self.p.index(":]", j + 2) + 2
            elif c == "]":
                return j + 1
            else:
                j += 1
        raise Untranslatable(f"unterminated character class at position {i}")

    def atom(self, end: int, flags: frozenset[str]) -> _Piece:
        text = self.p[self.i:end]
        self.i = end
        inside = _ascii_set(text, "".join(sorted(flags)))
        strict = _byte_class(inside)
        if not inside:
            strict = r"\n"  # never matches within a line; a match across lines is confirmed
            self.exact = False
        if _ascii_only(text, flags):
            return _Piece(strict, strict)
        return _Piece(strict, f"(?:{strict}|{HIGH})" if inside else HIGH)

    def widen(self, end: int) -> _Piece:
        self.i = end
        self.exact = False
        return _Piece(WIDE, WIDE, nullable=True)

    def group(self, flags: frozenset[str]) -> tuple[_Piece | None, frozenset[str]]:
        start = self.i
        head = GROUP_HEAD.match(self.p, start)
        if head is None:
            return self.special_group(flags), flags
        self.i = head.end()
        inner = flags
        if head.group("close") is not None:  # (?flags-flags) or (?flags-flags:...)
            inner = (flags | _flag_set(head.group("on"))) - _flag_set(head.group("off"))
            if head.group("close") == ")":
                return None, inner
        piece = self.subpattern(inner, start)
        return piece, flags

    def subpattern(self, flags: frozenset[str], start: int) -> _Piece:
        branches = self.branches(flags)
        if self.peek() != ")":
            raise Untranslatable(f"unbalanced '(' at position {start}")
        self.i += 1
        return _Piece(f"(?:{_join(branches, False)})", f"(?:{_join(branches, True)})",
                      nullable=_nullable(branches))

    def special_group(self, flags: frozenset[str]) -> _Piece:
        p, start = self.p, self.i
        if p.startswith("(?#", start):
            close = p.find(")", start)
            if close < 0:
                raise Untranslatable("unterminated comment")
            self.i = close + 1
            return _Piece("", "", zero_width=True)
        if p.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?>"), start):
            atomic = p.startswith("(?>", start)
            self.i = start + (4 if p.startswith("(?<", start) else 3)
            piece = self.subpattern(flags, start)
            self.exact = False
            if atomic:
                return piece  # without the atomic rule it can only match more
            return _Piece("", "", zero_width=True)  # an assertion dropped: matches more
        return self.widen(self.group_end(start))  # conditionals, recursion

    def group_end(self, i: int) -> int:
        depth, j = 0, i
        while j < len(self.p):
            c = self.p[j]
            if c == "\\":
                j += 2
                continue
            if c == "[":
                j = self.class_end(j)
                continue
            depth += {"(": 1, ")": -1}.get(c, 0)
            j += 1
            if depth == 0:
                return j
        raise Untranslatable(f"unbalanced '(' at position {i}")

    def quantifier(self, piece: _Piece) -> _Piece:
        q = QUANTIFIER.match(self.p, self.i)
        if q is None or (q.group(0).startswith("{") and not (q.group("low") or q.group("comma"))):
            return self.fuzzy(piece)
        self.i = q.end()
        low = {"*": 0, "+": 1, "?": 0}.get(q.group(0), int(q.group("low") or 0))
        quant = q.group(0)
        if quant.startswith("{"):
            quant = f"{{{low}{q.group('comma') or ''}{q.group('high') or ''}}}"
        if self.peek() == "?":
            self.i += 1  # lazy: the same lines match
        elif self.peek() == "+":
            self.i += 1  # possessive: greedy finds every line it does, and more
            self.exact = False
        if piece.zero_width:
            if piece.strict or piece.loose:
                self.exact = False
            return _Piece("", "", zero_width=True)  # a repeated assertion: dropping it widens
        return _Piece(piece.strict, piece.loose, low=low, quant=quant, nullable=piece.nullable)

    def fuzzy(self, piece: _Piece) -> _Piece:
        """`item{e<=1}`: regex's fuzzy matching; whatever it matches lies within the line."""
        if not FUZZY.match(self.p, self.i):
            return piece
        self.i = self.p.index("}", self.i) + 1
        self.exact = False
        return _Piece(WIDE, WIDE, nullable=True)


def _trim(branch: list[_Piece]) -> None:
    """Drop what may repeat at the end of a branch: the same lines match, and Hyperscan
    reports a match once instead of at every character a trailing `.*` or `\\d+` adds."""
    while branch and branch[-1].low is not None:
        last = branch[-1]
        if last.low == 0:
            branch.pop()
            continue
        branch[-1] = _Piece(last.strict, last.loose, low=None,
                            quant="" if last.low == 1 else f"{{{last.low}}}",
                            nullable=last.nullable)
        break


def _nullable(branches: list[list[_Piece]]) -> bool:
    return any(all(p.nullable for p in branch) for branch in branches)


def _join(branches: list[list[_Piece]], loose: bool) -> str:
    return "|".join("".join(p.render(loose) for p in branch) for branch in branches)


def _flag_set(text: str | None) -> frozenset[str]:
    flags = frozenset(regex.findall(r"V\d|[a-zA-Z]", text or ""))
    unknown = flags - KNOWN_FLAGS - {"V0"}
    if unknown:
        raise Untranslatable(f"inline flag {', '.join(sorted(unknown))} is not supported")
    return flags - {"V0"}


@functools.lru_cache(maxsize=4096)
def _ascii_set(atom: str, flags: str) -> frozenset[int]:
    """ASCII characters (never \\n) that `atom`, a one-character pattern, matches."""
    compiled = regex.compile(f"(?{flags})(?:{atom})" if flags else f"(?:{atom})")
    return frozenset(c for c in range(128) if c != 10 and compiled.fullmatch(chr(c)))


def _ascii_only(atom: str, flags: frozenset[str]) -> bool:
    """True when `atom` surely matches no character outside ASCII (else: assume it may)."""
    if "i" in flags and any(c.isalpha() for c in atom):
        return False  # case folding: k matches the Kelvin sign
    if len(atom) == 1:
        return atom.isascii() and atom != "."
    if len(atom) == 2 and atom[0] == "\\":
        return not atom[1].isalnum()
    if atom.startswith("[") and not atom.startswith("[^"):
        return atom.isascii() and regex.search(r"\\[^\\\]\[.^$*+?(){}|/-]|\[:", atom) is None
    return False


def _byte_class(members: frozenset[int]) -> str:
    if len(members) == 1:
        c = next(iter(members))
        return chr(c) if chr(c).isalnum() else f"\\x{c:02x}"
    ranges: list[str] = []
    codes = sorted(members)
    start = prev = codes[0] if codes else 0
    for c in [*codes[1:], -1]:
        if c == prev + 1:
            prev = c
            continue
        ranges.append(f"\\x{start:02x}" if start == prev else f"\\x{start:02x}-\\x{prev:02x}")
        start = prev = c
    return "[" + "".join(ranges) + "]" if codes else ""


# --- scanning ------------------------------------------------------------------------------

# (lines, plain_at, text, match): `lines` lines that hit no rule or only noise rules; when
# `plain_at` is k > 0, the k-th of them is the block's first line that hits no rule at all
# (progress, and where a stall ends); then, when `match` is not None, one more line `text`
# and what `RuleSet.match` says of it.
Segment = tuple[int, int, str, "LineMatch | None"]
_QUIET = LineMatch()  # stands for "noise only": counted, neither progress nor an event
PROBE_LINES = 256  # lines tried one by one for the first plain line before finding all noise
_Line = tuple[int, int, int]  # start, end (its b"\n"), mask of pattern ids


@dataclass(frozen=True)
class _Entry:
    pid: int  # Hyperscan's id; entries are in the order RuleSet.match reports them
    kind: str  # start, done, signal, noise, progress or finish
    rule: Any
    pattern: regex.Pattern[str]
    exact: bool


_Hit = tuple[_Entry, "regex.Match[str] | None"]


@dataclass(frozen=True)
class _Plan:
    """What a line flagged with some set of patterns needs: the hits it is known to have,
    and the patterns `regex` must still search (progress rules, whose match feeds the
    counter, and patterns not exact on this kind of line)."""

    known: tuple[_Hit, ...]
    search: tuple[_Entry, ...]
    fixed: LineMatch | None  # the answer when no searched pattern matches
    progress_only: bool


class Prefilter:
    """Cuts a block of lines into segments that say, of every line, what `RuleSet.match`
    would; a plain line only matters as the block's first (see `Segment`). One thread at a
    time: Hyperscan's scratch space belongs to the database."""

    def __init__(self, rules: RuleSet, entries: Sequence[_Entry], strict: Any,
                 noise: dict[int, str], loose: Sequence[str], status: str) -> None:
        self.rules = rules
        self.status = status
        self._entries = tuple(entries)
        self._noise = tuple(e for e in entries if e.kind == "noise")
        self._strict = strict  # every pattern but the exact noise ones, over whole blocks
        self._other_id = len(entries)  # a byte >= 0x80: the line is checked loosely
        self._noise_forms = list(noise.values())  # exact noise rules, one line at a time
        self._noise_pids = list(noise)
        self._loose_forms = list(loose)  # every pattern, for lines with other bytes
        self._patterns = [e.pattern.pattern for e in entries]
        self._lazy: dict[str, Any] = {}  # databases compiled when first needed
        self._plans: dict[tuple[int, bool], _Plan] = {}

    def segments(self, data: bytes) -> list[Segment]:
        if not data:
            return []
        if not data.endswith(b"\n"):
            data += b"\n"  # as line-by-line reading takes an unterminated last line
        flagged = self._scan(data)
        first_plain = self._first_plain(data, flagged)  # among the lines not flagged
        placed = False  # plain_at given: later plain lines need no mention
        out: list[Segment] = []
        lines = plain_at = pos = 0
        for start, end, mask in flagged:
            if not placed and first_plain is not None and first_plain < start:
                plain_at = lines + data.count(b"\n", pos, first_plain) + 1
                placed = True
            lines += data.count(b"\n", pos, start)
            pos = end + 1
            text, match = self._line(data[start:end], mask)
            if match is not None and match is not _QUIET:
                out.append((lines, plain_at, text, match))
                lines = plain_at = 0
                continue
            lines += 1
            if match is None and not placed:  # flagged, but plain after all
                plain_at, placed = lines, True
        if not placed and first_plain is not None:
            plain_at = lines + data.count(b"\n", pos, first_plain) + 1
        lines += data.count(b"\n", pos)
        if lines:
            out.append((lines, plain_at, "", None))
        return out

    def _scan(self, data: bytes) -> list[_Line]:
        """The lines some pattern (other than an exact noise rule) may hit, or with a byte
        >= 0x80, in order."""
        codes: list[int] = []
        add = codes.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end << 16 | pid)

        self._strict.scan(data, match_event_handler=on_match)
        codes.sort()
        lines: list[_Line] = []
        start = end = -1
        mask = 0
        for code in codes:
            last = (code >> 16) - 1  # the match's last byte lies on its line
            if last > end:
                if mask:
                    lines.append((start, end, mask))
                end = data.find(b"\n", last)
                start = data.rfind(b"\n", 0, last) + 1
                mask = 0
            mask |= 1 << (code & 0xFFFF)
        if mask:
            lines.append((start, end, mask))
        return lines

    def _first_plain(self, data: bytes, flagged: list[_Line]) -> int | None:
        """Offset of the first line not flagged that no noise rule hits, or None. Such
        lines are pure ASCII, where the strict forms are exact. Lines are tried one by one;
        past PROBE_LINES (a block of NCCL spew), all noise lines are found in one scan."""
        pos: int | None = 0
        at = 0
        for _ in range(PROBE_LINES):
            pos, at = _unflagged(data, pos or 0, flagged, at)
            if pos is None or not self._noise_forms:
                return pos
            end = data.index(b"\n", pos)
            if not self._noise_mask(data[pos:end]):
                return pos
            pos = end + 1
        noisy: list[int] = []
        add = noisy.append

        def on_match(_pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end)  # the pattern ends in `[^\n]*$`: one report a line, at its end

        self._database("count").scan(data, match_event_handler=on_match)
        noisy.sort()
        i = 0
        while True:
            pos, at = _unflagged(data, pos or 0, flagged, at)
            if pos is None:
                return None
            end = data.index(b"\n", pos)
            i = bisect.bisect_left(noisy, end, i)
            if i == len(noisy) or noisy[i] != end:
                return pos
            pos = end + 1

    def _line(self, raw: bytes, mask: int) -> tuple[str, LineMatch | None]:
        """What RuleSet.match says of a flagged line."""
        text = raw.decode("utf-8", "replace")
        if not mask >> self._other_id & 1:
            return text, self._confirm(text, mask | self._noise_mask(raw), strict=True)
        loose = self._database("loose")
        if not loose:  # Hyperscan refused the loose forms: ask every rule
            found = self.rules.match(text)
            if found is not None and found == LineMatch(noise=found.noise):
                return text, _QUIET
            return text, found
        hits = 0

        def on_match(pid: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal hits
            hits |= 1 << pid

        loose.scan(raw + b"\n", match_event_handler=on_match)  # as in a block
        return text, self._confirm(text, hits, strict=False)

    def _noise_mask(self, raw: bytes) -> int:
        """Pattern ids of the exact noise rules that hit an ASCII line."""
        if not self._noise_forms:
            return 0
        hits = 0
        pids = self._noise_pids

        def on_match(i: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal hits
            hits |= 1 << pids[i]

        self._database("probe").scan(raw + b"\n", match_event_handler=on_match)
        return hits

    def _database(self, name: str) -> Any:
        if name not in self._lazy:
            if name == "probe":
                db = _compile(self._noise_forms, single=True)
            elif name == "count":
                db = _compile([f"(?:{'|'.join(self._noise_forms)})[^\\n]*$"])
            else:
                forms, _ = _compilable(dict(enumerate(self._loose_forms)), self._relaxed)
                db = _compile(list(forms.values()), list(forms), single=True) or False
            self._lazy[name] = db
        return self._lazy[name]

    def _relaxed(self, pid: int) -> str:
        return line_forms(self._patterns[pid], anchors=False).loose

    def _confirm(self, text: str, mask: int, strict: bool) -> LineMatch | None:
        plan = self._plans.get((mask, strict)) or self._plan(mask, strict)
        if not plan.search:
            return plan.fixed
        if plan.progress_only:
            progress = tuple((e.rule, m) for e in plan.search
                             if (m := self._search(e.pattern, text)) is not None)
            if not progress:
                return plan.fixed
            if plan.fixed is None or plan.fixed is _QUIET:
                noise = next((e.rule for e, _ in plan.known if e.kind == "noise"), None)
                return LineMatch(noise=noise, progress=progress)
            return dataclasses.replace(plan.fixed, progress=progress)
        hits = list(plan.known)
        for entry in plan.search:
            found = self._search(entry.pattern, text)
            if found is not None:
                hits.append((entry, found))
        hits.sort(key=lambda hit: hit[0].pid)
        return _line_match(hits)

    def _plan(self, mask: int, strict: bool) -> _Plan:
        entries = [e for e in self._entries if mask >> e.pid & 1]
        search = tuple(e for e in entries if e.kind == "progress" or not (strict and e.exact))
        known = tuple((e, None) for e in entries if e not in search)
        plan = _Plan(known, search, _line_match(list(known)),
                     all(e.kind == "progress" for e in search))
        self._plans[(mask, strict)] = plan
        return plan

    def _search(self, pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
        try:
            return pattern.search(text, timeout=rules_module.MATCH_TIMEOUT_S)
        except TimeoutError:
            self.rules.timeouts += 1
            return None


def _unflagged(data: bytes, pos: int, flagged: list[_Line], at: int) -> tuple[int | None, int]:
    """The first line starting at or after `pos` that is not flagged (None at the end of the
    block), and where to look next in `flagged` (sorted; `at` is where to start)."""
    while at < len(flagged) and flagged[at][0] < pos:
        at += 1
    while at < len(flagged) and flagged[at][0] == pos:
        pos = flagged[at][1] + 1
        at += 1
    return (pos if pos < len(data) else None), at


def _line_match(hits: list[_Hit]) -> LineMatch | None:
    """The LineMatch RuleSet.match gives for these hits (in pattern order); _QUIET when only
    noise rules hit."""
    if not hits:
        return None
    found: dict[str, list[Any]] = {}
    for entry, match in hits:
        found.setdefault(entry.kind, []).append(
            (entry.rule, match) if entry.kind == "progress" else entry.rule)
    if found.keys() == {"noise"}:
        return _QUIET
    return LineMatch(tuple(found.get("start", ())), tuple(found.get("done", ())),
                     tuple(found.get("signal", ())), (found.get("noise") or [None])[0],
                     tuple(found.get("progress", ())), (found.get("finish") or [None])[0])


def _entries(rules: RuleSet) -> list[tuple[str, Any, str]]:
    """(kind, rule, pattern) in the order RuleSet.match reports them."""
    return [
        *(("start", p, p.start) for p in rules.phases),
        *(("done", p, p.done) for p in rules.phases if p.done),
        *(("signal", s, s.match) for s in rules.signals),
        *(("noise", n, n.match) for n in rules.noise),
        *(("progress", p, p.match) for p in rules.progress),
        *(("finish", f, f.match) for f in rules.finish),
    ]


def line_forms(pattern: str, *, anchors: bool = True) -> Translation:
    """translate(), and a form that could match the empty string runs on to its line's end:
    Hyperscan tells a match by where it ends, and an empty match at the start of a line
    would look like the end of the one before."""
    forms = translate(pattern, anchors=anchors)
    if not forms.nullable:
        return forms
    return Translation(f"(?:{forms.strict}){EVERY_LINE}", f"(?:{forms.loose}){EVERY_LINE}",
                       forms.exact, nullable=False)


def _compile(expressions: Sequence[str], ids: Sequence[int] | None = None, *,
             single: bool = False) -> Any:
    """A Hyperscan database, or None when Hyperscan refuses the patterns. `single`: each
    pattern reports once a scan (for scans of one line, where only which ones hit matters)."""
    import hyperscan

    flags = hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_SINGLEMATCH if single else 0)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    try:
        db.compile(expressions=[e.encode() for e in expressions],
                   ids=list(ids or range(len(expressions))), elements=len(expressions),
                   flags=flags)
    except hyperscan.error:
        return None
    return db


def _compilable(forms: dict[int, str],
                fallback: Callable[[int], str]) -> tuple[dict[int, str], set[int]]:
    """The forms, as Hyperscan will take them: one it proves can never match is left out (it
    matches no line); one it refuses (an anchor after other items, the empty string, too
    large) becomes its `fallback`, else EVERY_LINE. Also the ids so widened."""
    if not forms or _compile(list(forms.values())) is not None:
        return forms, set()
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


def _refusal(form: str) -> str | None:
    import hyperscan

    try:
        hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK).compile(
            expressions=[form.encode()], flags=hyperscan.HS_FLAG_MULTILINE)
    except hyperscan.error as exc:
        return str(exc)
    return None


def try_build(rules: RuleSet) -> tuple[Prefilter | None, str]:
    """A prefilter for `rules`, or None and why not (the engine then reads line by line)."""
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return None, "not used: hyperscan is not installed (pip install 'hangwatch[fast]')"
    entries: list[_Entry] = []
    strict: dict[int, str] = {}
    noise: dict[int, str] = {}
    loose: list[str] = []
    for kind, rule, pattern in _entries(rules):
        try:
            forms = line_forms(pattern)
        except Untranslatable as exc:
            return None, f"not used: rule {rule.id}: {exc}"
        pid = len(entries)
        entries.append(_Entry(pid, kind, rule, regex.compile(pattern), forms.exact))
        loose.append(forms.loose)
        # Exact noise rules are told apart line by line, and only when it matters.
        (noise if kind == "noise" and forms.exact else strict)[pid] = forms.strict
    if len(entries) >= 0xFFFF:
        return None, "not used: too many rules"
    patterns = [pattern for _, _, pattern in _entries(rules)]

    def relaxed(pid: int) -> str:
        return line_forms(patterns[pid], anchors=False).strict

    strict, widened = _compilable(strict, relaxed)
    noise, widened_noise = _compilable(noise, relaxed)
    for pid in widened_noise:
        strict[pid] = noise.pop(pid)
    for pid in widened | widened_noise:  # regex confirms them on every line
        entries[pid] = dataclasses.replace(entries[pid], exact=False)
    strict[len(entries)] = r"[\x80-\xff][\x00-\x7f]"  # a line with other bytes: checked loosely
    db = _compile(list(strict.values()), list(strict))
    if db is None:
        return None, "not used: hyperscan cannot compile the rules"
    exact = sum(e.exact for e in entries)
    status = f"hyperscan, {len(entries)} patterns ({exact} exact on ASCII lines)"
    if widened or widened_noise:
        status += f"; {len(widened | widened_noise)} widened where Hyperscan refused them"
    return Prefilter(rules, entries, db, noise, loose, status), status


def build_prefilter(rules: RuleSet) -> Prefilter | None:
    return try_build(rules)[0]
