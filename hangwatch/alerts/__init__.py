"""Alerts: payloads, targets, an on-disk spool and a sender thread off the watch loop."""
