"""`hangwatch serve`: watches from a config file, systemd's notify protocol, state kept across
restarts, reload on SIGHUP."""
