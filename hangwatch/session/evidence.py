"""Evidence on a stall: snapshot the job (GPUs, processes, stacks, the machine), then choose
the advice its evidence supports. Run by the session on a worker thread, never on its loop."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hangwatch.core.events import Advice, StallEvent
from hangwatch.core.rules import RuleSet
from hangwatch.session.session import Collector


def evidence_collector(rules: RuleSet, options: Callable[[], Any]) -> Collector:
    """Snapshot the job (options() gives the SnapshotOptions at stall time), then choose the
    advice its evidence supports."""

    def collect(stall: StallEvent) -> tuple[dict[str, Any] | None, list[Advice], list[str]]:
        from hangwatch.collectors.snapshot import key_findings, take_snapshot
        from hangwatch.core.evidence import diagnose

        # The rule set's `stacks:` say where each process's frames are.
        snapshot = take_snapshot(dataclasses.replace(options(), stack_rules=rules.stack_rules))
        advice = diagnose(rules.diagnoses, snapshot, phase=stall.phase,
                          signals=[s.id for s in stall.signals])
        return snapshot, list(advice), key_findings(snapshot)

    return collect
