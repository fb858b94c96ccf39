"""Durable runs: each run a DBOS workflow, each model and tool call a recorded step.

A run that stops (a crash, a kill, a deploy) is taken over by another process with
`DurableRuns.resume`: it continues from the run's last checkpoint, and every call that had
finished is answered from its record, never made again (see docs/decisions.md).
"""

from .runs import DurableRuns, RunInfo, RunStep, StoreError, default_store_url, open_runs

__all__ = ["DurableRuns", "RunInfo", "RunStep", "StoreError", "default_store_url", "open_runs"]
