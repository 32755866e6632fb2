"""Prometheus metrics and a health check, served over HTTP off the watch loop."""
