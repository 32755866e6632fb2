"""Clock synchronisation, as chrony, systemd (timedatectl) or the kernel (adjtimex) report it.

NCCL does not need synchronised clocks, but the people reading the logs of several nodes do,
and so do certificate and token checks: a node off by minutes tells a misleading story.
"""

from __future__ import annotations

import re
from typing import Any

from hangwatch.doctor.model import Check, Context, Outcome

COMMAND_S = 3.0
OFFSET_WARN_S = 1.0


def run(ctx: Context) -> Outcome:
    readings = [r for r in (_chrony(ctx), _timedatectl(ctx), ctx.machine.timex()) if r]
    known = [r for r in readings if r.get("synchronized") is not None]
    if not known:
        return [Check("clock.sync", "skip", "no chronyc, timedatectl or adjtimex to ask")], {
            "clock": {"synchronized": None}}
    best = known[0]
    offset = next((r["offset_s"] for r in readings if r.get("offset_s") is not None), None)
    maxerror = next((r["maxerror_s"] for r in readings if r.get("maxerror_s") is not None),
                    None)
    facts = {"clock": {"synchronized": best["synchronized"], "source": best["source"],
                       "offset_s": offset, "maxerror_s": maxerror}}
    said = f"{best['source']}: " + ("synchronised" if best["synchronized"] else
                                    "not synchronised")
    if offset is not None:
        said += f", offset {offset:+.6f}s"
    if maxerror is not None:
        said += f", error bound {maxerror:g}s"
    if not best["synchronized"]:
        return [Check("clock.sync", "warn", said, "run an NTP client (chronyd or "
                      "systemd-timesyncd) on the host so every node's clock agrees")], facts
    if offset is not None and abs(offset) > OFFSET_WARN_S:
        return [Check("clock.sync", "warn", said, "let the NTP client step the clock "
                      "(`chronyc makestep`)")], facts
    return [Check("clock.sync", "ok", said)], facts


def _chrony(ctx: Context) -> dict[str, Any] | None:
    exe = ctx.machine.which("chronyc")
    if exe is None:
        return None
    result = ctx.machine.run([exe, "-n", "tracking"], ctx.bound(COMMAND_S))
    if result.returncode != 0:
        return None
    return parse_chrony(result.stdout)


def parse_chrony(text: str) -> dict[str, Any]:
    leap = re.search(r"^Leap status\s*:\s*(.+)$", text, re.M)
    system = re.search(r"^System time\s*:\s*([\d.]+) seconds (fast|slow)", text, re.M)
    offset = None
    if system:
        offset = float(system.group(1)) * (1 if system.group(2) == "fast" else -1)
    synced = None if leap is None else leap.group(1).strip() != "Not synchronised"
    return {"source": "chronyc", "synchronized": synced, "offset_s": offset}


def _timedatectl(ctx: Context) -> dict[str, Any] | None:
    exe = ctx.machine.which("timedatectl")
    if exe is None:
        return None
    result = ctx.machine.run([exe, "show", "--property=NTPSynchronized", "--value"],
                             ctx.bound(COMMAND_S))
    answer = result.stdout.strip()
    if result.returncode != 0 or answer not in ("yes", "no"):
        return None  # no systemd or no D-Bus here (a container)
    return {"source": "timedatectl", "synchronized": answer == "yes"}
