"""PyTorch Flight Recorder dumps: found from the job's environment, summarised, and handed to
torch's own analyzer when it is installed.

A job that sets `TORCH_FR_BUFFER_SIZE` (formerly `TORCH_NCCL_TRACE_BUFFER_SIZE`) records its
last collectives; on a watchdog timeout each rank writes them to `TORCH_FR_DUMP_TEMP_FILE`
(formerly `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, default `/tmp/nccl_trace_rank_`) followed by its
rank. The dumps are pickles: read here with an unpickler that builds plain data only (a dump
that names a class is refused), since a file in /tmp is not to be trusted.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hangwatch.core import desync
from hangwatch.core.ranks import span

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
ENABLE_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
ANALYZER = "torch.distributed.flight_recorder.fr_trace"
MAX_DUMPS = 256
MAX_DUMP_BYTES = 64 << 20
MAX_OUTPUT = 64 << 10
LAST_ENTRIES = 5
_NO_TORCH = re.compile(r"No module named '?torch(?:'|\.distributed)")


def collect(processes: Sequence[dict[str, Any]], timeout: float,
            pythons: Sequence[str] = ()) -> dict[str, Any] | None:
    """The dumps the job wrote, each summarised, and torch's analysis of them; None when no
    process of the job enables the Flight Recorder."""
    prefixes = dump_prefixes(processes)
    if not prefixes:
        return None
    dumps = [d for prefix in prefixes for d in find_dumps(prefix)][:MAX_DUMPS]
    summaries = [summarize(path) for path in dumps]
    result: dict[str, Any] = {"prefixes": prefixes, "dumps": summaries}
    if not dumps:
        result["note"] = (f"the Flight Recorder is on, but no dump was written yet under "
                          f"{', '.join(prefixes)} (ranks dump on a watchdog timeout)")
        return result
    found = _desync(summaries)
    if found is not None:
        result["desync"] = found.summary
    candidates = [*pythons, sys.executable]
    result["analysis"] = analyze(dumps, candidates, timeout)
    return result


def dump_prefixes(processes: Sequence[dict[str, Any]]) -> list[str]:
    prefixes: dict[str, None] = {}
    for process in processes:
        env = process.get("env") or {}
        enabled = any(env.get(v, "0").strip() not in ("", "0") for v in ENABLE_VARS)
        named = next((env[v] for v in PREFIX_VARS if env.get(v)), None)
        if enabled or named:
            prefixes[named or DEFAULT_PREFIX] = None
    return list(prefixes)


def find_dumps(prefix: str) -> list[Path]:
    """`PREFIX<rank>` files, by rank."""
    base = Path(prefix)
    try:
        names = os.listdir(base.parent)
    except OSError:
        return []
    found = [(int(n[len(base.name):]), base.parent / n) for n in names
             if n.startswith(base.name) and n[len(base.name):].isdigit()]
    return [path for _, path in sorted(found)]


def summarize(path: Path) -> dict[str, Any]:
    """A dump's rank, size, per-process-group status and last entries."""
    out: dict[str, Any] = {"path": str(path), "rank": _rank(path)}
    try:
        size = path.stat().st_size
        out["size"] = size
        if size > MAX_DUMP_BYTES:
            out["error"] = f"larger than {MAX_DUMP_BYTES >> 20} MiB; not read"
            return out
        dump = _load(path.read_bytes())
    except (OSError, ValueError, pickle.UnpicklingError, EOFError) as exc:
        out["error"] = f"cannot read: {exc}"
        return out
    entries = [e for e in dump.get("entries", []) if isinstance(e, dict)]
    out["pg_status"] = dump.get("pg_status", {})
    out["last"] = [_entry(e) for e in entries[-LAST_ENTRIES:]]
    # Retired entries are done with, whatever their state says (gloo leaves `scheduled`).
    pending = next((e for e in entries
                    if e.get("state") != "completed" and not e.get("retired")), None)
    out["waiting_in"] = _entry(pending) if pending else None
    return out


def analyze(dumps: Sequence[Path], pythons: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run torch's analyzer (`python -m torch.distributed.flight_recorder.fr_trace`) on a
    copy of the dumps, with the job's interpreter first (it has torch), then ours."""
    if timeout < 1.0:
        return {"status": "skipped", "output": "no time left within the snapshot's bound"}
    with tempfile.TemporaryDirectory(prefix="hangwatch-fr-") as folder:
        for path in dumps:
            with contextlib.suppress(OSError):
                shutil.copyfile(path, Path(folder) / f"rank_{_rank(path)}")
        tried: list[str] = []
        for python in dict.fromkeys(pythons):
            argv = [python, "-m", ANALYZER, folder, "-p", "rank_"]
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                      errors="replace", stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                return {"status": "timed out", "tool": " ".join(argv[:3]),
                        "output": f"did not finish within {timeout:.0f}s"}
            except OSError as exc:
                tried.append(f"{python}: {exc.strerror or exc}")
                continue
            output = (done.stdout + done.stderr)[-MAX_OUTPUT:]
            if done.returncode != 0 and _NO_TORCH.search(done.stderr):
                tried.append(f"{python}: torch is not installed")
                continue
            return {"status": "ok" if done.returncode == 0 else
                    f"failed (exit {done.returncode})", "tool": f"{python} -m {ANALYZER}",
                    "output": output.replace(folder, "<dumps>")}
    return {"status": "not installed",
            "output": "torch's Flight Recorder analyzer (torch.distributed.flight_recorder) "
                      "is not installed here: " + "; ".join(tried)
                      + ". The dumps are in the report; analyze them where torch is "
                        "installed: python -m torch.distributed.flight_recorder.fr_trace DIR"}


def _desync(summaries: Sequence[dict[str, Any]]) -> desync.Desync | None:
    works: dict[str, desync.Work] = {}
    for dump in summaries:
        waiting = dump.get("waiting_in")
        if dump.get("rank") is None or not waiting:
            continue
        works[str(dump["rank"])] = desync.Work(
            seq=waiting.get("collective_seq_id"), op=waiting.get("op"),
            group=str(waiting.get("process_group")))
    return desync.summarize(works, [str(d["rank"]) for d in summaries
                                    if d.get("rank") is not None], span)


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    group = entry.get("process_group")
    return {"collective_seq_id": entry.get("collective_seq_id"),
            "op": entry.get("profiling_name"), "state": entry.get("state"),
            "process_group": group[0] if isinstance(group, (list, tuple)) and group else group,
            "input_sizes": entry.get("input_sizes")}


def _rank(path: Path) -> int | None:
    digits = ""
    for char in reversed(path.name):
        if not char.isdigit():
            break
        digits = char + digits
    return int(digits) if digits else None


class _PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, tuples, strings and numbers; refuses anything that names a class
    (which is how a pickle runs code)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing {module}.{name}: not a plain Flight Recorder "
                                     "dump")


def _load(data: bytes) -> dict[str, Any]:
    if data[:1] in (b"{", b"["):
        loaded = json.loads(data)
    else:
        loaded = _PlainUnpickler(io.BytesIO(data)).load()
    if not isinstance(loaded, dict):
        raise ValueError("not a Flight Recorder dump")
    return loaded
