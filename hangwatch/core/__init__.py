"""Pure logic: rules, phases, stall timing. No files, threads or hardware in here."""
