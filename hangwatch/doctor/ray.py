"""Ray: state an earlier run left behind, and a bounded `ray status` when a cluster is set up.

`ray.init(address="auto")` joins the cluster named in /tmp/ray/ray_current_cluster: when that
cluster is gone, the job waits on a GCS that will never answer; when an old one still runs, the
job lands on it with the old run's actors and resources.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from hangwatch.doctor.holders import describe_pid
from hangwatch.doctor.model import Check, Context, Outcome

RAY_DAEMONS = ("raylet", "gcs_server", "plasma_store", "ray::")
STATUS_S = 8.0
SHOWN = 3


def run(ctx: Context) -> Outcome:
    root = Path(ctx.env.get("RAY_TMPDIR") or ctx.machine.tmp) / "ray"
    exe = ctx.machine.which("ray")
    current = root / "ray_current_cluster"
    address = ctx.env.get("RAY_ADDRESS")
    daemons = _ray_processes(ctx.machine.proc)
    sessions = _sessions(root)
    if not (exe or address or daemons or sessions or current.exists()):
        return [Check("ray.state", "skip", "Ray is not installed and left no state here")], {}
    checks = [_state(ctx, root, daemons, sessions, address)]
    if exe is None:
        checks.append(Check("ray.status", "skip", "no `ray` command on PATH"))
    elif not (address or current.exists()):
        checks.append(Check("ray.status", "skip", f"no cluster configured (RAY_ADDRESS unset, "
                            f"no {current})"))
    else:
        checks.append(_status(ctx, exe, address))
    return checks, {}


def _sessions(root: Path) -> list[Path]:
    with contextlib.suppress(OSError):
        return sorted(p for p in root.iterdir()
                      if p.name.startswith("session_") and p.name != "session_latest")
    return []


def _ray_processes(proc: Path) -> list[int]:
    pids = []
    with contextlib.suppress(OSError):
        for entry in proc.iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if (entry / "comm").read_text().strip().startswith(RAY_DAEMONS):
                        pids.append(int(entry.name))
    return sorted(pids)


def _state(ctx: Context, root: Path, daemons: list[int], sessions: list[Path],
           address: str | None) -> Check:
    current = root / "ray_current_cluster"
    running = ", ".join(describe_pid(ctx.machine.proc, p) for p in daemons[:SHOWN])
    if daemons and not address:
        return Check("ray.state", "warn", f"Ray processes from an earlier run still run: "
                     f"{running}{' ...' if len(daemons) > SHOWN else ''}; ray.init() may join "
                     "that cluster instead of starting its own",
                     "`ray stop --force` if that cluster is not meant to be used")
    if current.exists() and not daemons and not address:
        return Check("ray.state", "warn", f"{current} names a cluster but no Ray process runs "
                     "here: ray.init(address='auto') would wait for it",
                     f"`ray stop --force`, then remove {current}")
    if sessions and not daemons:
        return Check("ray.state", "ok", f"{len(sessions)} old session folder(s) in {root} "
                     "(logs of earlier runs; no Ray process runs)")
    return Check("ray.state", "ok", "Ray processes belong to the configured cluster"
                 if daemons else "no Ray process runs")


def _status(ctx: Context, exe: str, address: str | None) -> Check:
    timeout = ctx.bound(STATUS_S)
    argv = [exe, "status", *(["--address", address] if address else [])]
    result = ctx.machine.run(argv, timeout)
    target = f"the cluster at {address}" if address else "the local cluster"
    if result.timed_out:
        return Check("ray.status", "fail", f"`ray status` did not answer within {timeout:g}s",
                     f"{target} does not answer: check its head node, or `ray stop --force` "
                     "and start it again")
    if result.returncode != 0:
        tail = (result.stderr or result.stdout or result.start_error or "").strip()
        return Check("ray.status", "fail", f"`ray status` failed: "
                     f"{tail.splitlines()[-1] if tail else f'exit {result.returncode}'}",
                     f"start {target} (`ray start --head`), or unset RAY_ADDRESS")
    nodes = sum(1 for line in result.stdout.splitlines() if line.strip().startswith("1 node_"))
    return Check("ray.status", "ok", f"{target} answers" + (f"; {nodes} active node(s)"
                                                            if nodes else ""))
