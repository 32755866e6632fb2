"""Advice chosen by evidence: facts read off a snapshot, matched against `diagnoses` rules."""

from __future__ import annotations

# The conditions a `diagnoses` rule may use in `when`, with the values each accepts.
# A condition holds when the fact's value is one of the listed values (`stack` takes a regex).
WHEN_KEYS: dict[str, tuple[str, ...] | None] = {
    "gpus": ("busy", "idle", "mixed", "none"),
    "nvml": ("ok", "timeout", "missing", "error"),
    "processes": ("all_sleeping", "none_found", "some_running"),
    "process_status": ("disk-sleep", "zombie", "stopped", "dead"),
    "shm": ("full", "ok"),
    "disk": ("full", "ok"),
    "stack": None,
    "phase": None,
    "signal": None,
}
