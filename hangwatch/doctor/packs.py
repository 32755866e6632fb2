"""Checks that rule packs add in YAML (`checks:`): a variable that must be set, a path that
must exist. `~` and `$VARS` in a path are expanded from the job's environment."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hangwatch.config import PackCheck
from hangwatch.doctor.model import Check, Context, Outcome, Status

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
