"""A job whose processes try to outlive it: a grandchild that calls setsid (leaving the process
group), a double-forked daemon whose parent exits at once, and a child that ignores SIGTERM.
Then it hangs. Every process appends its pid to $JOB_PIDS_FILE."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def record_pid() -> None:
    with open(os.environ["JOB_PIDS_FILE"], "a") as fh:
        fh.write(f"{os.getpid()}\n")


def main() -> None:
    role = sys.argv[1] if len(sys.argv) > 1 else "root"
    record_pid()
    if role == "setsid-grandchild":
        os.setsid()
        time.sleep(3600)
    elif role == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, __file__, "setsid-grandchild"])
        time.sleep(3600)
    else:
        subprocess.Popen([sys.executable, __file__, "stubborn"])
        if os.fork() == 0:  # double fork: the daemon's parent exits before anyone looks
            if os.fork() == 0:
                os.setsid()
                record_pid()
                time.sleep(3600)
            os._exit(0)
        time.sleep(1.5)  # let the tree form before going quiet
        print("all workers started", flush=True)
        time.sleep(3600)


if __name__ == "__main__":
    main()
