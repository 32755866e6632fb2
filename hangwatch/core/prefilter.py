"""Find, in a whole block of lines at once, the few lines any rule could hit.

Matching every rule against every line in Python costs tens of microseconds a line; a job
with `NCCL_DEBUG=INFO` writes millions of lines. Hyperscan (the optional `hangwatch[fast]`
extra) scans a block for all patterns in one pass at hundreds of MB/s and says which
patterns end on which line; only those lines reach Python. The result must be the same as
matching line by line, so each rule pattern is translated here rather than handed over as is:

* `strict` form, for lines of pure ASCII (nearly all log lines): every one-character atom
  (a literal, `.`, `\\w`, a class, with the rule's case flags) is replaced by the exact set
  of ASCII bytes that Python's `regex` itself accepts for it, never `\\n`, so a match cannot
  leave its line and `^ $ \\b` see the line's edges as they do on a single line. A pattern
  built only of such atoms is *exact*: Hyperscan's answer is the rule's answer.
* constructs Hyperscan lacks (lookarounds, back-references, atomic groups, fuzzy matching,
  recursion) are widened to what contains them (`[^\\n]*`, or nothing for an assertion): the
  pattern then finds a superset of lines, and `regex` confirms each candidate.
* `loose` form, for lines with other bytes: any atom that might match a non-ASCII character
  also accepts one (1-4 bytes >= 0x80) and `\\b \\B` are dropped, a superset again.

A pattern whose meaning depends on flags this cannot follow (verbose, full case folding,
version 1 sets) makes `build_prefilter` return None, and the engine matches line by line.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import regex

from hangwatch.core.rules import MATCH_TIMEOUT_S, LineMatch, RuleSet

# Flags whose effect this translation follows: i through atoms; a/u change \w only for
# characters outside ASCII (handled by the loose form); m and s change nothing on one line.
KNOWN_FLAGS = frozenset("imsau")
WIDE = r"[^\n]*"  # stands for any construct that matches some part of one line
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


@dataclass
class _Piece:
    """One item of a branch in both forms; `low` is the least repeat count when quantified."""

    strict: str
    loose: str
    zero_width: bool = False
    low: int | None = None
    quant: str = ""

    def render(self, loose: bool) -> str:
        text = self.loose if loose else self.strict
        return f"(?:{text}){self.quant}" if self.quant else text


def translate(pattern: str) -> Translation:
    return _Translator(pattern).run()


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.exact = True

    def run(self) -> Translation:
        branches = self.branches(frozenset())
        if self.i < len(self.p):
            raise Untranslatable(f"unbalanced ')' at position {self.i}")
        for branch in branches:
            _trim(branch)
        return Translation(_join(branches, False), _join(branches, True), self.exact)

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
            return _Piece(c, c, zero_width=True), flags
        if c == "\\":
            return self.escape(flags), flags
        if c in "*+?":
            raise Untranslatable(f"nothing to repeat at position {self.i}")
        return self.atom(self.i + 1, flags), flags

    def escape(self, flags: frozenset[str]) -> _Piece:
        c = self.p[self.i + 1:self.i + 2]
        if c in ("A", "Z"):
            self.i += 2
            return _Piece("^", "^", True) if c == "A" else _Piece("$", "$", True)
        if c in ("b", "B"):
            self.i += 2
            return _Piece("\\" + c, "", True)  # next to a non-ASCII character: unknown
        if (c.isdigit() and c != "0") or c in ("g", "G", "K", "m", "M", "X", "L"):
            return self.widen(self.escape_end(self.i))  # back-reference, word edge, list...
        if c.isalnum() and c not in ESCAPE_ATOMS:
            raise Untranslatable(f"unknown escape \\{c}")
        return self.atom(self.escape_end(self.i), flags)

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
        return _Piece(WIDE, WIDE)

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
        return _Piece(f"(?:{_join(branches, False)})", f"(?:{_join(branches, True)})")

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
        return _Piece(piece.strict, piece.loose, low=low, quant=quant)

    def fuzzy(self, piece: _Piece) -> _Piece:
        """`item{e<=1}`: regex's fuzzy matching; whatever it matches lies within the line."""
        if not FUZZY.match(self.p, self.i):
            return piece
        self.i = self.p.index("}", self.i) + 1
        self.exact = False
        return _Piece(WIDE, WIDE)


def _trim(branch: list[_Piece]) -> None:
    """Drop what may repeat at the end of a branch: the same lines match, and Hyperscan
    reports a match once instead of at every character a trailing `.*` or `\\d+` adds."""
    while branch and branch[-1].low is not None:
        last = branch[-1]
        if last.low == 0:
            branch.pop()
            continue
        branch[-1] = _Piece(last.strict, last.loose, low=None,
                            quant="" if last.low == 1 else f"{{{last.low}}}")
        break


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

Segment = tuple[int, int, str, LineMatch | None]
_QUIET = LineMatch()  # stands for "noise only": counted, neither progress nor an event


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
    known: tuple[_Hit, ...]
    search: tuple[_Entry, ...]
    fixed: LineMatch | None  # the answer when no searched pattern matches
    progress_only: bool  # only progress rules are searched: the rest of the answer is fixed


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


class Prefilter:
    """Cuts a block into segments: `(plain, quiet, text, match)` is `plain` lines that hit no
    rule, then `quiet` lines that hit only noise rules, then (when `match` is not None) one
    line `text` that hit the rules in `match`, exactly as `RuleSet.match` would say."""

    def __init__(self, rules: RuleSet, entries: Sequence[_Entry], strict: Any, loose: Any,
                 status: str) -> None:
        self.rules = rules
        self.status = status
        self._entries = tuple(entries)
        self._strict = strict
        self._loose = loose
        self._other = 1 << len(entries)  # id of the "line has a byte >= 0x80" pattern
        self._quiet_mask = sum(1 << e.pid for e in entries if e.kind == "noise" and e.exact)
        self._plans: dict[tuple[int, bool], _Plan] = {}

    def segments(self, data: bytes) -> list[Segment]:
        if not data:
            return []
        if not data.endswith(b"\n"):
            data += b"\n"  # as line-by-line reading takes an unterminated last line
        out: list[Segment] = []
        plain = quiet = pos = 0
        for start, end, mask in self._candidates(data):
            before = data.count(b"\n", pos, start)
            pos = end + 1
            match = self._match(data[start:end], mask)
            if match is _QUIET:
                if before and quiet:
                    out.append((plain, quiet, "", None))
                    plain = quiet = 0
                plain, quiet = plain + before, quiet + 1
                continue
            if quiet and (before or match is None):
                out.append((plain, quiet, "", None))
                plain = quiet = 0
            plain += before
            if match is None:
                plain += 1
            else:
                out.append((plain, quiet, match[0], match[1]))
                plain = quiet = 0
        tail = data.count(b"\n", pos)
        if quiet and tail:
            out.append((plain, quiet, "", None))
            plain = quiet = 0
        plain += tail
        if plain or quiet:
            out.append((plain, quiet, "", None))
        return out

    def _candidates(self, data: bytes) -> list[tuple[int, int, int]]:
        """(start, end, pattern mask) of each line some pattern matched, in order."""
        found: list[int] = []
        add = found.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add(end << 16 | pid)

        self._strict.scan(data, match_event_handler=on_match)
        found.sort()
        lines: list[tuple[int, int, int]] = []
        start = end = -1
        mask = 0
        for code in found:
            last = (code >> 16) - 1  # the match's last byte lies on its line
            if last >= end:
                if mask:
                    lines.append((start, end, mask))
                end = data.find(b"\n", last)
                start = data.rfind(b"\n", 0, last) + 1
                mask = 0
            mask |= 1 << (code & 0xFFFF)
        if mask:
            lines.append((start, end, mask))
        return lines

    def _match(self, raw: bytes, mask: int) -> tuple[str, LineMatch] | LineMatch | None:
        """The line's rules: _QUIET for exact noise only, None for none."""
        if mask & self._other:
            mask = self._loose_mask(raw)
            strict = False
        else:
            if not mask & ~self._quiet_mask:
                return _QUIET
            strict = True
        text = raw.decode("utf-8", "replace")
        found = self._confirm(text, mask, strict)
        if found is None or found is _QUIET:
            return found
        return text, found

    def _loose_mask(self, raw: bytes) -> int:
        found = 0

        def on_match(pid: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            nonlocal found
            found |= 1 << pid

        self._loose.scan(raw, match_event_handler=on_match)
        return found

    def _confirm(self, text: str, mask: int, strict: bool) -> LineMatch | None:
        plan = self._plans.get((mask, strict)) or self._plan(mask, strict)
        if not plan.search:
            return plan.fixed
        if plan.progress_only:
            progress = tuple((e.rule, m) for e in plan.search
                             if (m := self._search(e.pattern, text)) is not None)
            if not progress:
                return plan.fixed
            fixed = plan.fixed if plan.fixed is not None and plan.fixed is not _QUIET else None
            if fixed is None:
                noise = next((e.rule for e, _ in plan.known if e.kind == "noise"), None)
                return LineMatch(noise=noise, progress=progress)
            return dataclasses.replace(fixed, progress=progress)
        hits = list(plan.known)
        for entry in plan.search:
            found = self._search(entry.pattern, text)
            if found is not None:
                hits.append((entry, found))
        if plan.known:
            hits.sort(key=lambda hit: hit[0].pid)
        return _line_match(hits)

    def _plan(self, mask: int, strict: bool) -> _Plan:
        """Which hits a mask proves, and which `regex` must still search: progress rules
        (their match feeds the counter) and patterns not exact on this kind of line."""
        entries = [e for e in self._entries if mask >> e.pid & 1]
        search = tuple(e for e in entries if e.kind == "progress" or not (strict and e.exact))
        known = tuple((e, None) for e in entries if e not in search)
        plan = _Plan(known, search, _line_match(list(known)),
                     all(e.kind == "progress" for e in search))
        self._plans[(mask, strict)] = plan
        return plan

    def _search(self, pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
        try:
            return pattern.search(text, timeout=MATCH_TIMEOUT_S)
        except TimeoutError:
            self.rules.timeouts += 1
            return None


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


def try_build(rules: RuleSet) -> tuple[Prefilter | None, str]:
    """A prefilter for `rules`, or None and why not (the engine then reads line by line)."""
    try:
        import hyperscan
    except ImportError:
        return None, "not used: hyperscan is not installed (pip install 'hangwatch[fast]')"
    entries: list[_Entry] = []
    strict: list[bytes] = []
    loose: list[bytes] = []
    for kind, rule, pattern in _entries(rules):
        compiled = regex.compile(pattern)
        if compiled.search("") is not None:
            return None, f"not used: rule {rule.id} matches every line"
        try:
            t = translate(pattern)
        except Untranslatable as exc:
            return None, f"not used: rule {rule.id}: {exc}"
        entries.append(_Entry(len(entries), kind, rule, compiled, t.exact))
        strict.append(t.strict.encode())
        loose.append(t.loose.encode())
    if len(entries) >= 0xFFFF:
        return None, "not used: too many rules"
    strict.append(rb"[\x80-\xff][\x00-\x7f]")  # a line with other bytes: checked loosely
    flags = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_ALLOWEMPTY
    try:
        strict_db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        strict_db.compile(expressions=strict, ids=list(range(len(strict))),
                          elements=len(strict), flags=flags)
        loose_db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        loose_db.compile(expressions=loose, ids=list(range(len(loose))),
                         elements=len(loose), flags=flags)
    except hyperscan.error as exc:
        return None, f"not used: hyperscan cannot compile the rules: {exc}"
    exact = sum(e.exact for e in entries)
    status = f"hyperscan, {len(entries)} patterns ({exact} exact on ASCII lines)"
    return Prefilter(rules, entries, strict_db, loose_db, status), status


def build_prefilter(rules: RuleSet) -> Prefilter | None:
    return try_build(rules)[0]
