"""Take one snapshot of a process tree in this process and print what it took, as JSON.

`python bench/snap_worker.py PID BOUND_S [--hang]`; with --hang, py-spy is replaced by a
tool that never answers (and ignores SIGTERM), to show the snapshot still returns in time.
"""

from __future__ import annotations

import json
import stat
import sys
import tempfile
import time
from pathlib import Path

import hangwatch.collectors.snapshot as snapshot
from hangwatch.collectors.snapshot import SnapshotOptions, take_snapshot

HANGING_TOOL = "#!/bin/sh\ntrap '' TERM INT\nwhile :; do sleep 1; done\n"


def main() -> int:
    pid, bound = int(sys.argv[1]), float(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        if "--hang" in sys.argv:
            tool = Path(tmp) / "py-spy"
            tool.write_text(HANGING_TOOL)
            tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
            snapshot.find_py_spy = lambda: str(tool)  # type: ignore[assignment]
        start = time.monotonic()
        snap = take_snapshot(SnapshotOptions(pids=(pid,), stacks=True, total_timeout=bound,
                                             stack_timeout=bound))
        elapsed = time.monotonic() - start
    procs = snap["processes"]
    stacks = [p["stack"] for p in procs if p.get("stack")]
    print(json.dumps({"elapsed_s": elapsed, "processes": len(procs), "with_stack": len(stacks),
                      "stuck_frames": sum("all_reduce_that_never_returns" in s for s in stacks),
                      "stack_errors": sorted({p.get("stack_error") or "" for p in procs} - {""}),
                      "errors": snap["errors"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
