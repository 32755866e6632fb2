"""Between phases: when nothing is open, the place expected next.

A job that completed a phase (Ray started; the engine finished loading) and opened nothing
after it hangs in what comes next. A pack's phases are declared in the order its framework
runs them; past a pack's last phase, or for the generic layer's phases, the usual order of a
training job says what follows: resources, data, model, distributed init, engine, the
training loop, evaluation or a checkpoint, then the loop again or shutdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import regex

from hangwatch.core.model import PhaseRule

# The usual order of a training job, by the generic layer's phase ids (the KINDS of place);
# a stage may hold several places, any of which comes next.
_STAGES = (("resource_wait",), ("data_load",), ("model_load",), ("distributed_init",),
           ("build",), ("train_loop",), ("evaluation", "checkpoint_save"), ("shutdown",))
GENERIC_ORDER = tuple(tuple(f"generic:{i}" for i in stage) for stage in _STAGES)
# A training job evaluates and saves between stretches of its loop: after those the loop
# resumes, or the job shuts down.
_RESUMES = {_STAGES.index(("evaluation", "checkpoint_save")):
            ("generic:train_loop", "generic:shutdown")}
USUAL = "the usual order of a training job"


class Rules(Protocol):
    """What `expected_next` needs of a RuleSet."""

    phases: tuple[PhaseRule, ...]

    def start_pattern(self, phase: PhaseRule) -> regex.Pattern[str]: ...


@dataclass(frozen=True)
class Between:
    after: PhaseRule
    before: tuple[PhaseRule, ...]
    by: str  # the order it comes from

    def text(self) -> str:
        nexts = " or ".join(f"{r.title} ({r.id})" for r in self.before)
        return f"after {self.after.title} ({self.after.id}), before {nexts}, by {self.by}"


def expected_next(last: PhaseRule | None, rules: Rules) -> Between | None:
    """After `last` (the phase completed last), the phase or phases expected next."""
    if last is None:
        return None
    if not last.origin.generic:
        declared = [p for p in rules.phases if p.origin.pack == last.origin.pack
                    and p.parent is None]
        ids = [p.id for p in declared]
        if last.id in ids and ids.index(last.id) + 1 < len(ids):
            return Between(last, (declared[ids.index(last.id) + 1],),
                           f"the order of pack {last.origin.pack}")
    generic = {p.id: p for p in rules.phases if p.origin.generic}
    stage = _stage(last, generic, rules)
    if stage is None:
        return None
    nexts = (_RESUMES[stage],) if stage in _RESUMES else GENERIC_ORDER[stage + 1:]
    for later in nexts:
        found = tuple(generic[i] for i in later if i in generic)
        if found:
            return Between(last, found, USUAL)
    return None


FINISHED = "a job that says it finished exits next"


def after_finish(last: PhaseRule, rules: Rules) -> Between | None:
    """After a finish line (`[after training is done]`), what is left is the process's exit:
    a job still there hangs in its shutdown (threads, workers or a process group not torn
    down), whatever phase completed last."""
    shutdown = next((p for p in rules.phases if p.id == "generic:shutdown"), None)
    return Between(last, (shutdown,), FINISHED) if shutdown is not None else None


def before_in_order(earlier: PhaseRule, later: PhaseRule) -> bool:
    """Whether `earlier`'s kind of place comes before `later`'s in the usual order of a
    training job (both must declare a kind): a job opening `later` is past `earlier`."""
    first, then = _kind_stage(earlier.kind), _kind_stage(later.kind)
    return first is not None and then is not None and first < then


def _kind_stage(kind: str | None) -> int | None:
    return next((i for i, stage in enumerate(_STAGES) if kind in stage), None)


def _stage(phase: PhaseRule, generic: dict[str, PhaseRule], rules: Rules) -> int | None:
    """The stage of the usual order `phase` belongs to: its kind's (a generic phase is its
    own kind), else, for a user's phase that declares none, the first stage whose words its
    title or id holds."""
    if phase.kind is not None:
        return _kind_stage(phase.kind)
    if phase.origin.generic:
        return None  # a generic phase of no kind (a user's generic layer) has no stage
    names = (phase.title, phase.id.replace("_", " "))
    for stage, ids in enumerate(GENERIC_ORDER):
        for phase_id in ids:
            rule = generic.get(phase_id)
            if rule is not None and any(rules.start_pattern(rule).search(n) for n in names):
                return stage
    return None
