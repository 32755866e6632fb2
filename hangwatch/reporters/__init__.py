"""Outputs: the live console, plain lines, JSON Lines, incident reports, CI integrations."""
