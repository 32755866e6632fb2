"""Rule packs as plain, validated data: what packs/parse.py produces and rules.py compiles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hangwatch.core.stackrules import StackRule

Severity = Literal["info", "warning", "error"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error")


@dataclass(frozen=True)
class Origin:
    """Where a rule was written, so every message can point at it."""

    file: str
    line: int
    pack: str
    generic: bool = False  # the generic layer: named by words, outranked by every pack

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# The kinds of place every training job passes through, in their usual order (core/order.py):
# the generic layer's phases, and what a pack's phase declares itself as (`kind:`).
KINDS = ("resource_wait", "data_load", "model_load", "distributed_init", "build", "train_loop",
         "evaluation", "checkpoint_save", "shutdown")
# The kinds of trouble a signal line says, whatever a framework's words: the generic layer's
# signals, and what a pack's signal declares itself as (`kind:`; the NCCL watchdog's
# collective timeout is a `timeout`, vLLM's shared-memory wait a `stall_warning`).
SIGNAL_KINDS = ("stall_warning", "timeout", "watchdog", "oom", "connection_error",
                "address_in_use", "missing_peer")


@dataclass(frozen=True)
class PhaseRule:
    id: str
    title: str
    start: str
    origin: Origin
    done: str | None = None
    stall_after: float | None = None
    advice: tuple[str, ...] = ()
    parent: str | None = None  # a step inside this phase: the phase stays open around it
    # generic layer: False when, seen inside a pack's phase, it is no step of its own (a
    # training loop's lines inside the pack's own training loop say nothing new)
    nests: bool = True
    # The generic place this phase is a case of (one of KINDS): a pack's `rollout_init` is a
    # model load, its `gkd_train_loop` a training loop. A generic phase is its own kind.
    kind: str | None = None


@dataclass(frozen=True)
class SignalRule:
    id: str
    match: str
    severity: Severity
    origin: Origin
    advice: tuple[str, ...] = ()
    kind: str | None = None  # one of SIGNAL_KINDS; a generic signal is its own kind


@dataclass(frozen=True)
class NoiseRule:
    id: str
    match: str
    origin: Origin


@dataclass(frozen=True)
class ProgressRule:
    """A line that is progress only when it really advances.

    `counter`: a named group holding a number that must grow (per value of the other named
    groups); the same number again is a repeat, a lower one a new pass (next epoch).
    `heartbeat`: the line counts only when it changed outside its named groups and
    timestamps (an elapsed-time field ticking is not progress).
    """

    id: str
    match: str
    origin: Origin
    counter: str | None = None
    heartbeat: bool = False


@dataclass(frozen=True)
class FinishRule:
    id: str
    match: str
    origin: Origin


@dataclass(frozen=True)
class RankRule:
    """Where a line of a merged log says which rank wrote it: `match` has a named group
    `rank` (a number, or any label such as a Ray actor's `pid=N, ip=A`)."""

    id: str
    match: str
    origin: Origin


@dataclass(frozen=True)
class DiagnosisRule:
    """Advice chosen by evidence: every condition in `when` must hold (see core/evidence.py)."""

    id: str
    when: tuple[tuple[str, tuple[str, ...]], ...]
    origin: Origin
    advice: tuple[str, ...] = ()


@dataclass(frozen=True)
class RulePack:
    name: str
    file: str
    description: str = ""
    extends: tuple[str, ...] = ()
    builtin: bool = False
    generic: bool = False
    phases: tuple[PhaseRule, ...] = ()
    signals: tuple[SignalRule, ...] = ()
    noise: tuple[NoiseRule, ...] = ()
    progress: tuple[ProgressRule, ...] = ()
    finish: tuple[FinishRule, ...] = ()
    diagnoses: tuple[DiagnosisRule, ...] = field(default=())
    ranks: tuple[RankRule, ...] = ()
    stack_rules: tuple[StackRule, ...] = ()  # `stacks:` frame patterns -> places

    def rule_count(self) -> dict[str, int]:
        return {
            "phases": len(self.phases),
            "signals": len(self.signals),
            "noise": len(self.noise),
            "progress": len(self.progress),
            "finish": len(self.finish),
            "diagnoses": len(self.diagnoses),
            "ranks": len(self.ranks),
            "stacks": len(self.stack_rules),
        }


@dataclass(frozen=True)
class PackCheck:
    """A preflight check from a pack's `checks:` (run by `hangwatch doctor`): an environment
    variable that must be set, or a path that must exist."""

    id: str
    kind: str  # "env" or "path"
    target: str
    status: str  # what a miss is: "fail" or "warn"
    fix: str
    origin: Origin
