"""Every engine is built here: `watch`, `check`, `run`, `demo`, `rules test` and each of
serve's watches get the same matcher (the multi-pattern prefilter when it can be built,
with its compiled databases kept in the user's cache folder) and the same thresholds."""

from __future__ import annotations

import argparse
from typing import Literal

from hangwatch.core.clock import Clock, SystemClock
from hangwatch.core.engine import Engine
from hangwatch.core.history import History
from hangwatch.core.prefilter import Prefilter
from hangwatch.core.rules import RuleSet
from hangwatch.errors import HangwatchError

Build = Literal["build"]


def prefilter_for(rules: RuleSet) -> Prefilter | None:
    """The block matcher for `rules`; None where hyperscan is missing or cannot follow the
    patterns (lines are then matched one by one, with the same events)."""
    from hangwatch.core.prefilter import build_prefilter
    from hangwatch.storage.cache import default_store

    return build_prefilter(rules, default_store())


def build_engine(rules: RuleSet, stall: float, *, clock: Clock | None = None,
                 prefilter: Prefilter | Build | None = "build", stall_given: bool = False,
                 phase_stall: dict[str, float] | None = None, history: History | None = None,
                 live: bool = False, unwrap: bool = True) -> Engine:
    """`prefilter`: one already built for `rules` (serve shares it among watches), None for
    line-by-line matching, or "build"."""
    return Engine(rules, default_stall=stall, clock=SystemClock() if clock is None else clock,
                  prefilter=prefilter_for(rules) if prefilter == "build" else prefilter,
                  stall_given=stall_given, phase_stall=phase_stall, history=history, live=live,
                  unwrap=unwrap)


def engine_for(rules: RuleSet, args: argparse.Namespace, history: History | None = None, *,
               live: bool = False) -> Engine:
    """The engine of a command line's thresholds: `--phase-stall`, then a given `--stall`,
    then a phase's own stall_after, then the default."""
    per_phase = dict(getattr(args, "phase_stall", []))
    unknown = sorted(p for p in per_phase if rules.phase(p) is None)
    if unknown:
        raise HangwatchError(f"--phase-stall: no phase or step named {', '.join(unknown)} "
                             f"(see `hangwatch rules show PACK`)")
    return build_engine(rules, args.stall, stall_given=getattr(args, "stall_given", True),
                        phase_stall=per_phase, history=history, live=live)
