"""Durable runs: each run a DBOS workflow, each model and tool call a recorded step.

A run that stops (a crash, a kill, a deploy, its model down) is taken over by another process
with `DurableRuns.resume`: it continues from the run's last checkpoint, and every call that had
finished is answered from its record, never made again (see docs/decisions.md).
"""

from .opening import open_runs
from .runs import DurableRuns, RunOptions
from .status import STATUSES, RunInfo, RunStep
from .tree import CallNode, call_tree

__all__ = [
    "STATUSES",
    "CallNode",
    "DurableRuns",
    "RunInfo",
    "RunOptions",
    "RunStep",
    "call_tree",
    "open_runs",
]
