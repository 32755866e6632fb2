"""What frameworks print, and which of it the generic layer names.

    python bench/vocab.py SOURCE_TREE [SOURCE_TREE ...] [--all] [--json]

Reads every .py file under the trees with `ast` (nothing is imported or run) and collects the
string literals passed to logger/logging calls (debug, info, warning, warn, error,
exception, critical), `print`, `rank_zero_info`-style helpers, and tqdm's `desc=`. f-strings
keep their literal parts, with `{}` where a value goes. Each string is matched against the
generic layer alone (rules/generic.yaml): the ones it does not name are listed (all of them
with --all), the vocabulary to read when widening that layer. Fetched framework code stays
outside the repository; only this script is kept.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hangwatch.core.rules import RuleSet
from hangwatch.packs.load import load_builtin_packs

LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log",
               "print", "info_once", "warning_once"}
PRINT_NAMES = {"print", "rank_zero_info", "rank_zero_warn", "rank_zero_print", "print_rank_0",
               "log_dist", "print0", "master_print", "logger_print", "echo", "secho"}
MIN_WORDS = 2  # a lone word says nothing


def literal(node: ast.expr) -> str | None:
    """The text of a string literal or f-string, `{}` for each value; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str)
                       else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):  # "..." % args
        return literal(node.left)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):  # "...".format(...)
        return literal(node.func.value)
    return None


def _is_log_call(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in PRINT_NAMES
    if isinstance(func, ast.Attribute):
        return func.attr in LOG_METHODS or func.attr in PRINT_NAMES
    return False


def strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, text) of what a module prints or logs."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if _is_log_call(node):
            for arg in node.args[:2]:
                text = literal(arg)
                if text is not None:
                    yield node.lineno, text
                    break
        for keyword in node.keywords:
            if keyword.arg == "desc":  # tqdm(..., desc="Tokenizing")
                text = literal(keyword.value)
                if text is not None:
                    yield node.lineno, text


def collect(root: Path) -> Iterator[tuple[str, int, str]]:
    for path in sorted(root.rglob("*.py")):
        if any(part in ("tests", "test", "docs", "examples") for part in path.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for line, text in strings(tree):
            text = " ".join(text.split())
            if len(text.split()) >= MIN_WORDS:
                yield str(path.relative_to(root)), line, text


def generic_rules() -> RuleSet:
    return RuleSet([p for p in load_builtin_packs() if p.generic])


def named(rules: RuleSet, text: str) -> list[str]:
    """The generic ids `text` hits (with `{}` read as a number, as the job prints it)."""
    found = rules.match(text.replace("{}", "7"))
    if found is None:
        return []
    return [r.id for r in (*found.phase_starts, *found.phase_dones, *found.signals)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", type=Path, help="framework source folders")
    parser.add_argument("--all", action="store_true", help="list named strings too")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    args = parser.parse_args(argv)
    rules = generic_rules()
    total = hits = 0
    for tree in args.trees:
        for file, line, text in collect(tree):
            ids = named(rules, text)
            total += 1
            hits += bool(ids)
            if ids and not args.all:
                continue
            if args.json:
                print(json.dumps({"tree": str(tree), "file": file, "line": line, "text": text,
                                  "generic": ids}))
            else:
                print(f"{tree.name}/{file}:{line}: {', '.join(ids) or '-'}: {text[:160]}")
    print(f"{hits}/{total} strings named by the generic layer", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
