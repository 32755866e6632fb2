"""Export the rule set's line patterns for GNU grep, the catch-up reference.

`python bench/patterns.py DIR` writes DIR/patterns.pcre, one PCRE alternation (GNU grep
takes a single -P pattern), and DIR/patterns.ere, one POSIX ERE per line, when every pattern
has one; and prints the grep commands. The ERE translation keeps the set of matching lines;
it only rewrites syntax ERE spells differently (`(?:`, `\\d`, `{,n}`, lazy quantifiers,
escapes in brackets).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

GROUP_OPEN = re.compile(r"\(\?(?::|P?<(?![=!])\w+>)")
SIMPLE_ESCAPES = {"d": "[0-9]", "D": "[^0-9]"}
KEEP_ESCAPES = set("wWsSbB") | set(".[]{}()*+?|^$\\/-:'\"<>=!,#&~ @%_;`")
CLASS_ESCAPES = {"d": "0-9", "s": "[:space:]", "w": "[:alnum:]_"}


def rule_patterns() -> list[str]:
    from hangwatch.packs.load import load_rule_set

    seen: dict[str, None] = {}
    for _kind, _rule, pattern in load_rule_set().patterns():
        seen.setdefault(pattern)
    return list(seen)


def sample_patterns(log: Path, count: int, probe: int = 1 << 20) -> list[str]:
    """`count` rule patterns of the kind a log needs, among those with an ERE form: those
    that hit a line of its first `probe` bytes, then others of the same packs, in order."""
    import regex

    from hangwatch.packs.load import load_rule_set

    rules = load_rule_set()
    pack = {r.id: r.origin.pack for r in (*rules.phases, *rules.signals, *rules.noise,
                                           *rules.progress, *rules.finish)}
    found = list(dict.fromkeys((p, pack[rule]) for _kind, rule, p in rules.patterns()
                               if to_ere(p) is not None))
    with log.open("rb") as fh:
        head = fh.read(probe).decode("utf-8", "replace")
    hit = [p for p, _ in found if regex.compile(p, regex.MULTILINE).search(head)]
    packs = {k for p, k in found if p in hit}
    rest = [p for p, k in found if k in packs and p not in hit]
    return [*hit, *rest][:count]


def export_ere(out_dir: Path, found: list[str], name: str) -> Path:
    """`found` as a grep -E pattern file (every pattern must have an ERE form)."""
    path = out_dir / name
    path.write_text("".join(f"{to_ere(p)}\n" for p in found))
    return path


def to_ere(pattern: str) -> str | None:
    """GNU ERE for a Python pattern, or None when it needs PCRE (lookarounds, flags...)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "(":
            head = GROUP_OPEN.match(pattern, i)
            if pattern.startswith("(?", i) and head is None:
                return None
            out.append("(")
            i = head.end() if head else i + 1
        elif c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt in SIMPLE_ESCAPES:
                out.append(SIMPLE_ESCAPES[nxt])
            elif nxt in KEEP_ESCAPES:
                out.append("\\" + nxt)
            else:
                return None
            i += 2
        elif c == "[":
            end, text = _bracket(pattern, i)
            if text is None:
                return None
            out.append(text)
            i = end
        elif c in "*+?}" and pattern[i + 1:i + 2] == "?":
            out.append(c)  # lazy: the same lines match
            i += 2
        elif c == "{" and pattern.startswith("{,", i):
            out.append("{0,")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _bracket(pattern: str, i: int) -> tuple[int, str | None]:
    j = i + 1
    negate = pattern[j:j + 1] == "^"
    j += negate
    items: list[str] = []
    close = bracket = dash = False
    first = True
    while j < len(pattern) and (pattern[j] != "]" or first):
        c = pattern[j]
        first = False
        if c == "\\":
            nxt = pattern[j + 1:j + 2]
            if nxt in CLASS_ESCAPES:
                items.append(CLASS_ESCAPES[nxt])
            elif nxt == "]":
                close = True
            elif nxt == "-":
                dash = True
            elif nxt and not nxt.isalnum():
                items.append(nxt)
            else:
                return j, None
            j += 2
        elif c == "]":
            close = True
            j += 1
        elif c == "[":
            bracket = True
            j += 1
        else:
            items.append(c)
            j += 1
    if j >= len(pattern):
        return j, None
    # In a POSIX bracket `]` must come first and `-` last to stand for themselves.
    body = "".join(items) + ("[" if bracket else "") + ("-" if dash else "")
    return j + 1, "[" + ("^" if negate else "") + ("]" if close else "") + body + "]"


def to_pcre(patterns: list[str]) -> str:
    """One alternation; group names dropped, as PCRE refuses the same name twice."""
    return "|".join(f"(?:{GROUP_OPEN.sub('(?:', p)})" for p in patterns)


def export(out_dir: Path) -> dict[str, Path]:
    """Write patterns.pcre, and patterns.ere when every pattern has an ERE form; return
    them by grep option letter ("P", "E")."""
    found = rule_patterns()
    files = {"P": out_dir / "patterns.pcre"}
    files["P"].write_text(to_pcre(found))
    ere = [to_ere(p) for p in found]
    if all(e is not None for e in ere):
        files["E"] = out_dir / "patterns.ere"
        files["E"].write_text("".join(f"{e}\n" for e in ere))
    return files


def grep_argv(mode: str, pattern_file: Path) -> list[str]:
    """`grep -c` with the patterns; the log's path goes last."""
    if mode == "E":
        return ["grep", "-c", "-E", "-f", str(pattern_file)]
    return ["grep", "-c", "-P", "-e", pattern_file.read_text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the pattern files to")
    args = parser.parse_args(argv)
    for mode, path in export(args.out_dir).items():
        last = f'"$(cat {path})"' if mode == "P" else str(path)
        print(" ".join([*grep_argv(mode, path)[:-1], last, "LOG"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
