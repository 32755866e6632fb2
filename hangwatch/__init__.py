"""hangwatch: watch a training job's log and say where it hung, why, and what to do."""

__version__ = "0.1.0"
