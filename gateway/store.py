"""Where stored runs live: a `RunStore` keeps the latest `RunState` of each run.

Handed to `Gateway.run(checkpoint=store.save)`, a store holds every run's state after each
step, so a run stopped by a crash, a deploy or a dead model provider continues later with
`Gateway.resume(await store.load(run_id))`, in this process or another.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

import anyio

from .errors import StoreUnavailable, UnknownRun
from .run_state import RunState, stored_state

__all__ = ["FileRunStore", "RunStore"]


class RunStore(Protocol):
    async def save(self, state: RunState) -> None:
        """Keep `state` as the latest of its run."""
        ...

    async def load(self, run_id: str) -> RunState:
        """The latest state of `run_id`. Raises `UnknownRun`."""
        ...

    async def delete(self, run_id: str) -> None:
        """Forget a run (a finished one need not be kept)."""
        ...


_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class FileRunStore:
    """One JSON file per run in a directory, replaced atomically at every save."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def path(self, run_id: str) -> Path:
        if not _RUN_ID.fullmatch(run_id):  # the id becomes a file name: no paths in it
            raise UnknownRun(f"not a run id: {run_id!r}")
        return self.directory / f"{run_id}.json"

    async def save(self, state: RunState) -> None:
        """Raises `StoreUnavailable` when the file cannot be written (its directory under a
        file, the disk full, no permission)."""
        path = self.path(state.run_id)
        try:
            await anyio.to_thread.run_sync(_write_atomically, path, state.model_dump_json())
        except OSError as exc:
            raise StoreUnavailable(f"cannot store run {state.run_id!r} in {path}: {exc}") from exc

    async def load(self, run_id: str) -> RunState:
        """The stored state of `run_id`. Raises `UnknownRun` for a missing, unreadable or
        invalid file, and for one holding another run (resuming it would run it twice)."""
        path = self.path(run_id)
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UnknownRun(f"no stored run {run_id!r} in {self.directory}") from None
        except OSError as exc:
            raise UnknownRun(f"cannot read stored run {path}: {exc.strerror}") from exc
        except UnicodeDecodeError:
            raise UnknownRun(f"stored run {path} is not a run's state (not UTF-8 text)") from None
        state = stored_state(text, run_id)
        if state.run_id != run_id:
            raise UnknownRun(
                f"stored run {path} holds run {state.run_id!r}, not {run_id!r}: refused (a run "
                "is stored under its own id only)"
            )
        return state

    async def delete(self, run_id: str) -> None:
        """Raises `StoreUnavailable` when the file is there and cannot be removed."""
        path = self.path(run_id)
        try:
            await anyio.Path(path).unlink(missing_ok=True)
        except OSError as exc:
            raise StoreUnavailable(f"cannot delete stored run {path}: {exc}") from exc


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    with partial.open("w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    partial.replace(path)  # a reader sees the old state or the new one, never half of one
