"""A launcher that waits for workers that never register: it keeps printing, but only noise."""

from __future__ import annotations

import time

print("launcher: started, 2 workers expected")
start = time.monotonic()
while True:
    time.sleep(0.25)
    print(f"Waiting for 2 workers... (elapsed: {time.monotonic() - start:.1f}s)")
