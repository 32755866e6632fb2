"""The child process that talks to NVML: `python -m hangwatch.collectors.nvml_probe`.

It prints one JSON object on stdout. It exists so that a driver that never answers blocks this
child, which the parent kills, and never the watcher itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from hangwatch.collectors.gpu import DEFAULT_MODULE, read_nvml


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hangwatch.collectors.nvml_probe")
    parser.add_argument("--module", default=DEFAULT_MODULE,
                        help="NVML bindings to import: a module name or a .py file")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="seconds between the two utilization samples")
    args = parser.parse_args(argv)
    json.dump(read_nvml(args.module, args.interval), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
