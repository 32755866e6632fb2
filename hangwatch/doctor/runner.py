"""Run the families of checks side by side, each on a daemon thread, and stop waiting at the
deadline: a family still running then (blocked on a dead mount, a wedged driver) is a `fail`
naming it, and the command ends on time."""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any

from hangwatch.collectors.bounded import Background
from hangwatch.doctor.model import Check, Context, Facts, Machine, Options, Outcome

FAMILIES = ("rendezvous", "network", "shm", "gpu", "ray", "data", "clock", "limits", "disk",
            "versions", "packs")


@dataclass
class Report:
    host: str
    checks: list[Check]
    facts: Facts = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"host": self.host, "checks": [c.as_dict() for c in self.checks],
                "facts": self.facts, "elapsed_s": self.elapsed_s}


def run_doctor(machine: Machine, options: Options,
               families: tuple[str, ...] = FAMILIES) -> Report:
    started = time.monotonic()
    ctx = Context(machine, options, started + options.timeout)
    running = {name: Background(_family(name, ctx), f"doctor-{name}") for name in families}
    checks: list[Check] = []
    facts: Facts = {}
    for name, job in running.items():
        outcome, error = job.result(ctx.deadline - time.monotonic())
        if outcome is None:
            checks.append(_unfinished(name, error, options.timeout))
            continue
        checks += outcome[0]
        facts.update(outcome[1])
    return Report(machine.hostname, checks, facts, round(time.monotonic() - started, 2))


def _family(name: str, ctx: Context) -> Any:
    module = importlib.import_module(f"hangwatch.doctor.{name}")

    def run() -> Outcome:
        outcome: Outcome = module.run(ctx)
        return outcome
    return run


def _unfinished(name: str, error: str | None, timeout: float) -> Check:
    if error == "timed out":
        return Check(name, "fail", f"the {name} checks did not finish within {timeout:g}s: "
                     "something they read blocks (a hung network mount, a wedged driver, a "
                     "resolver that does not answer)",
                     f"find what blocks; `hangwatch doctor --only {name}` runs them alone")
    return Check(name, "warn", f"the {name} checks could not run: {error}",
                 "report this as a hangwatch bug, with the detail above")
