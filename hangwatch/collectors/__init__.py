"""Evidence gathered when a job stalls: GPUs, processes, stacks, the system.

Every collector is bounded in time and turns a failure into data; none raises to its caller.
"""
