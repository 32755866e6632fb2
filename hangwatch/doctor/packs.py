"""Checks that rule packs add in YAML (`checks:`): a variable that must be set, a path that
must exist. `~` and `$VARS` in a path are expanded from the job's environment."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from hangwatch.core.model import PackCheck
from hangwatch.doctor.model import Check, Context, Outcome, Status
from hangwatch.errors import ConfigError, ConfigErrors
from hangwatch.packs.load import builtin_rules_dir, rule_files
from hangwatch.packs.parse import parse_pack

_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def run(ctx: Context) -> Outcome:
    return [_run_one(ctx, c) for c in ctx.options.pack_checks], {}


def _run_one(ctx: Context, check: PackCheck) -> Check:
    check_id = f"pack.{check.origin.pack}.{check.id}"
    where = f"({check.origin.file}:{check.origin.line})"
    missed: Status = "warn" if check.status == "warn" else "fail"
    if check.kind == "env":
        if ctx.env.get(check.target):
            return Check(check_id, "ok", f"{check.target} is set")
        return Check(check_id, missed, f"{check.target} is not set {where}",
                     check.fix or f"export {check.target}=...")
    path = Path(_expand(ctx, check.target))
    if path.exists():
        return Check(check_id, "ok", f"{path} exists")
    return Check(check_id, missed, f"{path} does not exist {where}",
                 check.fix or f"create or mount {path}")


def _expand(ctx: Context, text: str) -> str:
    text = _VAR.sub(lambda m: ctx.env.get(m.group(1) or m.group(2), m.group(0)), text)
    if text.startswith("~"):
        text = str(ctx.machine.home) + text[1:]
    return os.path.normpath(text)


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
            checks += parse_pack(file.read_text(encoding="utf-8"), str(file), builtin)[1]
        except ConfigErrors as exc:
            errors.extend(exc.errors)
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(ConfigError(f"cannot read: {exc}", file=str(file)))
    if errors:
        raise ConfigErrors(errors)
    return checks
