"""Translate a `regex` rule pattern into forms Hyperscan takes, matching within one line.

In its *strict* form, used on lines of pure ASCII, every one-character atom (a literal, `.`,
`\\w`, a class, under the rule's flags) becomes the exact set of ASCII bytes Python's `regex`
accepts for it, never `\\n`: a match cannot leave its line, and `^ $ \\b` see a line's edges as
on a line alone. Built only of such atoms a form is *exact*: Hyperscan's answer is the rule's.
Constructs Hyperscan lacks (lookarounds, back-references, fuzzy matching, recursion) are
widened to what contains them, so the caller must confirm with `regex`. The *loose* form, for
lines with other bytes, lets an atom match any non-ASCII character too: a superset again.
The *narrow* forms are parts of those that every match contains, for scans that only find
the lines a rule may hit (`core/prefilter.py`'s rare lines): a pattern such as
`\b(?:ranks?|nodes?)\b[^\n.;]*\b(?:unreachable|not responding)\b` is scanned for by its
rarer end, not by every line that names a rank.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import regex

# Flags whose effect this translation follows: i through atoms; a/u change \w only for
# characters outside ASCII (handled by the loose form); m and s change nothing on one line.
KNOWN_FLAGS = frozenset("imsau")
WIDE = r"[^\n]*"  # stands for any construct that matches some part of one line
EVERY_LINE = r"[^\n]*\n"  # to the end of a line: stands for a pattern Hyperscan refuses
HIGH = r"[\x80-\xff]{1,4}"  # one character outside ASCII, or one undecodable byte
# The only characters outside ASCII that `regex` folds onto ASCII ones under (?i): the dotted
# and dotless i, the long s, the Kelvin sign (tests check the whole of Unicode).
CASE_PARTNERS = "\u0130\u0131\u017f\u212a"
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
    # Of each branch, the part between unbounded gaps (`[^\n]*`, `.*?`) that is longest at
    # its shortest: each match holds a match of it on the same line (superset forms).
    narrow_strict: str
    narrow_loose: str


@dataclass
class _Piece:
    """One item of a branch in both forms; `low` is the least repeat count when quantified."""

    strict: str
    loose: str
    zero_width: bool = False
    low: int | None = None
    quant: str = ""
    nullable: bool = False
    shortest: int = 1  # the fewest bytes it matches, once (before `low`)
    # Its group's branches, when it is one: the narrow forms look inside a part made of it.
    inner: list[list[_Piece]] | None = None

    def __post_init__(self) -> None:
        self.nullable = self.nullable or self.zero_width or self.low == 0
        if self.zero_width:
            self.shortest = 0

    @property
    def least(self) -> int:
        """The fewest bytes it matches, quantifier included."""
        return self.shortest * (1 if self.low is None else self.low)

    @property
    def gap(self) -> bool:
        """An unbounded repeat that may match nothing: where the narrow forms cut."""
        return self.strict == WIDE or (self.low == 0 and (
            self.quant.startswith("*") or self.quant.rstrip("?+").endswith(",}")))

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
        narrow = _narrow(branches)
        return Translation(_join(branches, False), _join(branches, True), self.exact,
                           _nullable(branches), _join(narrow, False), _join(narrow, True))

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
        if "i" in flags and _ascii_only(text, flags - {"i"}):
            # A letter under (?i): only its case partners, not any character, on other lines.
            partners = _partners(text, "".join(sorted(flags)))
            return _Piece(strict, f"(?:{'|'.join([strict, *partners])})" if partners else strict)
        return _Piece(strict, f"(?:{strict}|{HIGH})" if inside else HIGH)

    def widen(self, end: int) -> _Piece:
        self.i = end
        self.exact = False
        return _Piece(WIDE, WIDE, nullable=True, shortest=0)

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
                      nullable=_nullable(branches), shortest=_shortest(branches),
                      inner=branches)

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
        return _Piece(piece.strict, piece.loose, low=low, quant=quant, nullable=piece.nullable,
                      shortest=piece.shortest, inner=piece.inner)

    def fuzzy(self, piece: _Piece) -> _Piece:
        """`item{e<=1}`: regex's fuzzy matching; whatever it matches lies within the line."""
        if not FUZZY.match(self.p, self.i):
            return piece
        self.i = self.p.index("}", self.i) + 1
        self.exact = False
        return _Piece(WIDE, WIDE, nullable=True, shortest=0)


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
                            nullable=last.nullable, shortest=last.shortest, inner=last.inner)
        break


def _shortest(branches: list[list[_Piece]]) -> int:
    return min(sum(p.least for p in branch) for branch in branches)


def _narrow(branches: list[list[_Piece]]) -> list[list[_Piece]]:
    """Of each branch, its part between gaps that matches the most bytes at the least (the
    whole branch when every part may match nothing). A part that is one group, matched once
    or more, is narrowed inside: each of its branches to its own part."""
    out: list[list[_Piece]] = []
    for branch in branches:
        parts: list[list[_Piece]] = [[]]
        for piece in branch:
            if piece.gap:
                parts.append([])
            else:
                parts[-1].append(piece)
        best = max(parts, key=lambda part: sum(p.least for p in part))
        if sum(p.least for p in best) == 0:
            out.append(branch)
            continue
        if len(best) == 1 and best[0].inner is not None:  # a group, once or more
            out.extend(_narrow(best[0].inner))  # each match holds one of its branches
            continue
        part = list(best)
        _trim(part)
        out.append(part)
    return out


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


@functools.lru_cache(maxsize=4096)
def _partners(atom: str, flags: str) -> tuple[str, ...]:
    """The UTF-8 bytes, as Hyperscan escapes, of the CASE_PARTNERS `atom` matches."""
    compiled = regex.compile(f"(?{flags})(?:{atom})")
    return tuple("".join(f"\\x{b:02x}" for b in c.encode()) for c in CASE_PARTNERS
                 if compiled.fullmatch(c))


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


def line_forms(pattern: str, *, anchors: bool = True) -> Translation:
    """translate(), and a form that could match the empty string runs on to its line's end:
    Hyperscan tells a match by where it ends, and an empty match at the start of a line
    would look like the end of the one before."""
    forms = translate(pattern, anchors=anchors)
    if not forms.nullable:
        return forms
    return Translation(f"(?:{forms.strict}){EVERY_LINE}", f"(?:{forms.loose}){EVERY_LINE}",
                       forms.exact, nullable=False,
                       narrow_strict=f"(?:{forms.narrow_strict}){EVERY_LINE}",
                       narrow_loose=f"(?:{forms.narrow_loose}){EVERY_LINE}")
