"""`hangwatch doctor`: the preflight that finds the usual causes of start-up hangs before a job
starts, and compares what several nodes found.

Each module holds one family of checks and exports `run(ctx) -> (checks, facts)`; `runner`
runs the families side by side, each bounded, and `compare` reads the JSON of several nodes.
Everything a check reads from the machine goes through `model.Machine`, so tests point it at
fake trees and real sockets instead of mocking.
"""
