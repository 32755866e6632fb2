"""A job-like tree of Python processes that hang: this one and N-1 children.

`python bench/snap_tree.py N` prints "ready" once every child is running.
"""

from __future__ import annotations

import subprocess
import sys
import time

CHILD = """
import time

def all_reduce_that_never_returns():
    time.sleep(1e9)

all_reduce_that_never_returns()
"""


def parent_waits_for_ranks() -> None:
    time.sleep(1e9)


def main() -> int:
    kids = [subprocess.Popen([sys.executable, "-c", CHILD]) for _ in range(int(sys.argv[1]) - 1)]
    time.sleep(0.5)  # let the children reach their sleep
    print("ready", " ".join(str(k.pid) for k in kids), flush=True)
    parent_waits_for_ranks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
