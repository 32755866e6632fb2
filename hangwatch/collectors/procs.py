"""What each process of the job is doing, through psutil (or any object shaped like it).

Reading some /proc files (cmdline, environ) takes the process's memory lock, and a process
stuck in the kernel can hold it forever. So `describe` publishes each record into a shared
dict as soon as a stage of it is read: the cheap, never-blocking fields first (status, CPU time),
the rest after. A caller that stops waiting keeps everything read so far.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psutil

from hangwatch.escape.redact import redact_argv, redact_env_value

# Environment variables that explain a distributed job; anything else stays out of reports.
INTERESTING_ENV = re.compile(
    r"(?:NCCL_|CUDA_|TORCH|PYTORCH_|MASTER_|RAY_|JAX_|XLA_|VLLM_|SGLANG_|OMP_|MKL_|PYTHON"
    r"|HF_|HUGGING_FACE|TRANSFORMERS_|NVIDIA_|GLOO_|UCX_|FI_|DEEPSPEED|MEGATRON|WANDB_)\w*"
    r"|(?:RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|NODE_RANK|ROLE_RANK"
    r"|LD_PRELOAD|LD_LIBRARY_PATH)"
)
_PYTHON_NAME = re.compile(r"(?:python|pypy)[\d.]*(?:-dbg)?|ray::.*")
# A rank on the command line: `--rank 3`, `--rank=3`, `--local-rank=3`.
_RANK_ARG = re.compile(r"--(?P<local>local[-_])?rank(?:=(?P<value>\d+))?")
MAX_PEERS = 32


def describe(found: Sequence[tuple[int, str]], sink: dict[int, dict[str, Any]], *,
             ps: Any = psutil, cpu_interval: float = 0.5,
             statuses_read: threading.Event | None = None,
             clock: Callable[[], float] = time.monotonic) -> None:
    """Fill `sink[pid]` for each (pid, found_by), stage by stage; a record is replaced, never
    mutated, so a reader holding one sees a consistent dict."""
    cpu_start: dict[int, tuple[float, float]] = {}
    handles: dict[int, Any] = {}
    try:
        for pid, found_by in found:
            record, handle = _basics(ps, pid, found_by)
            sink[pid] = record
            if handle is not None:
                handles[pid] = handle
                if record.get("cpu_time") is not None:
                    cpu_start[pid] = (clock(), record["cpu_time"])
    finally:
        if statuses_read is not None:
            statuses_read.set()  # even on a failure: the caller waits on it to start py-spy
    for pid, handle in handles.items():
        if sink[pid]["status"] != "zombie":
            sink[pid] = {**sink[pid], **_details(ps, handle)}
    # CPU percent over a short sample: enough to tell a spinning process from a waiting one.
    if cpu_start:
        time.sleep(max(0.0, cpu_interval - (clock() - min(t for t, _ in cpu_start.values()))))
    for pid, (t0, cpu0) in cpu_start.items():
        cpu1 = _cpu_time(ps, handles[pid])
        if cpu1 is not None:
            sink[pid] = {**sink[pid], "cpu_percent": round(100 * (cpu1 - cpu0)
                                                           / max(clock() - t0, 1e-3), 1)}


def is_python(record: dict[str, Any]) -> bool:
    exe = (record.get("exe") or "").rsplit("/", 1)[-1]
    return any(_PYTHON_NAME.fullmatch(n) for n in (exe, record.get("name") or "") if n)


def _basics(ps: Any, pid: int, found_by: str) -> tuple[dict[str, Any], Any]:
    record: dict[str, Any] = {"pid": pid, "found_by": found_by}
    try:
        proc = ps.Process(pid)
        with proc.oneshot():
            record["status"] = proc.status()
            record["ppid"] = proc.ppid()
            record["name"] = proc.name()
            record["create_time"] = proc.create_time()
            if record["status"] == "zombie":
                return record, proc
            record["exe"] = _quiet(ps, proc.exe)
            record["threads"] = _quiet(ps, proc.num_threads)
            record["cpu_time"] = _cpu_time(ps, proc)
        return record, proc
    except ps.ZombieProcess:
        record["status"] = "zombie"
        return record, None
    except ps.NoSuchProcess:
        record.update(status="dead", error="no such process (it exited or never existed)")
        return record, None
    except ps.AccessDenied:
        record.update(status=record.get("status", "unknown"), error="access denied")
        return record, None


def _details(ps: Any, proc: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    unreadable: list[str] = []

    def read(key: str, fn: Callable[[], Any]) -> None:
        try:
            out[key] = fn()
        except ps.AccessDenied:
            unreadable.append(f"{key}: access denied")
        except ps.NoSuchProcess:
            unreadable.append(f"{key}: process exited")
        except OSError as exc:
            unreadable.append(f"{key}: {exc.strerror or exc}")

    read("cmdline", lambda: redact_argv(proc.cmdline()))
    read("rss", lambda: proc.memory_info().rss)
    read("fds", proc.num_fds)
    read("fd_limit", lambda: proc.rlimit(ps.RLIMIT_NOFILE)[0])
    read("connections", lambda: _connections(proc))
    read("env", lambda: _env(proc.environ()))
    rank = rank_of(out.get("env") or {}, out.get("cmdline") or [])
    if rank is not None:
        out["rank"] = rank
    if unreadable:
        out["unreadable"] = unreadable
    return out


def rank_of(env: dict[str, str], argv: list[str]) -> str | None:
    """The process's rank: `RANK` in its environment (torchrun, Slurm wrappers), else
    `--rank N` on its command line, else the local rank from either."""
    on_line: dict[bool, str] = {}  # local or not -> value
    for i, arg in enumerate(argv):
        found = _RANK_ARG.fullmatch(arg)
        if found is None:
            continue
        value = found["value"] or (argv[i + 1] if i + 1 < len(argv) else "")
        if value.isdigit():
            on_line.setdefault(found["local"] is not None, value)
    for value in (env.get("RANK"), on_line.get(False), env.get("LOCAL_RANK"),
                  on_line.get(True)):
        if value is not None and value.isdigit():
            return str(int(value))
    return None


def _connections(proc: Any) -> dict[str, Any]:
    listening: set[int] = set()
    peers: list[dict[str, str]] = []
    for conn in proc.net_connections(kind="tcp"):
        if conn.status == "LISTEN" and conn.laddr:
            listening.add(conn.laddr.port)
        elif conn.raddr and len(peers) < MAX_PEERS:
            peers.append({"local": _addr(conn.laddr), "remote": _addr(conn.raddr),
                          "status": conn.status})
    return {"listening": sorted(listening), "peers": peers}


def _addr(addr: Any) -> str:
    if not addr:
        return ""
    host = f"[{addr.ip}]" if ":" in addr.ip else addr.ip
    return f"{host}:{addr.port}"


def _env(environ: dict[str, str]) -> dict[str, str]:
    return {name: redact_env_value(name, value) for name, value in sorted(environ.items())
            if INTERESTING_ENV.fullmatch(name)}


def _cpu_time(ps: Any, proc: Any) -> float | None:
    times = _quiet(ps, proc.cpu_times)
    return None if times is None else round(times.user + times.system, 2)


def _quiet(ps: Any, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (ps.AccessDenied, ps.NoSuchProcess, OSError):
        return None
