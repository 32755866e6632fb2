"""ulimits that NCCL and data loaders run into: locked memory for InfiniBand, open files.

NCCL over InfiniBand/RoCE registers (pins) its buffers; with the usual 64 KiB `memlock` it
fails to register them, or hangs in its first collective. Each rank opens a descriptor per peer
socket and DataLoader workers pass tensors as descriptors, so 1024 open files run out.
"""

from __future__ import annotations

import contextlib
import resource

from hangwatch.doctor.model import Check, Context, Outcome

NOFILE_WANTED = 65536


def run(ctx: Context) -> Outcome:
    return [_memlock(ctx), _nofile(ctx)], {}


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def _rdma_devices(ctx: Context) -> list[str]:
    with contextlib.suppress(OSError):
        return sorted(p.name for p in (ctx.machine.sysfs / "class" / "infiniband").iterdir())
    return []


def _memlock(ctx: Context) -> Check:
    soft, hard = ctx.machine.getrlimit(resource.RLIMIT_MEMLOCK)
    devices = _rdma_devices(ctx)
    said = f"memlock {_limit(soft)} (hard {_limit(hard)})"
    if soft == resource.RLIM_INFINITY:
        return Check("limits.memlock", "ok", said)
    if not devices:
        return Check("limits.memlock", "ok", f"{said}; no InfiniBand/RoCE device, so NCCL pins "
                     "no memory")
    return Check("limits.memlock", "fail", f"{said} with RDMA devices "
                 f"{', '.join(devices)}: NCCL cannot pin its buffers",
                 "`ulimit -l unlimited` before launching (docker: --ulimit memlock=-1; "
                 "systemd: LimitMEMLOCK=infinity; /etc/security/limits.conf)")


def _nofile(ctx: Context) -> Check:
    soft, hard = ctx.machine.getrlimit(resource.RLIMIT_NOFILE)
    said = f"nofile {_limit(soft)} (hard {_limit(hard)})"
    if soft == resource.RLIM_INFINITY or soft >= NOFILE_WANTED:
        return Check("limits.nofile", "ok", said)
    raise_to = NOFILE_WANTED if hard == resource.RLIM_INFINITY else min(hard, NOFILE_WANTED)
    fix = (f"`ulimit -n {raise_to}` before launching" if raise_to > soft else
           "raise the hard limit (docker: --ulimit nofile=65536:65536; systemd: LimitNOFILE)")
    return Check("limits.nofile", "warn", f"{said}: below {NOFILE_WANTED}, which many ranks or "
                 "DataLoader workers per node can run out of", fix)
