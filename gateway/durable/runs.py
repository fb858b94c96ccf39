"""Runs as DBOS workflows in a SQLite file or a PostgreSQL database.

DBOS is one instance per process: `open_runs` launches it (and `DurableRuns.close` destroys
it). The workflow body is the engine's own `Gateway.resume`, handed a `DbosJournal` that
records each model and tool call as a DBOS step under the engine's name for it, and a
checkpoint that keeps the latest `RunState` as the workflow's `state` event.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from dbos import DBOS, DBOSClient, DBOSConfig, SetWorkflowID, WorkflowHandleAsync
from pydantic import JsonValue

from ..engine import Gateway
from ..errors import GatewayError, UnknownRun
from ..memory_config import data_dir
from ..run_state import RunResult, RunState
from ..trace import TraceHook

__all__ = ["DurableRuns", "RunInfo", "RunStep", "StoreError", "default_store_url", "open_runs"]

_log = logging.getLogger(__name__)

STORE_FILE = "runs.sqlite"
STATE_EVENT = "state"
APP_VERSION = "agent-gateway-runs-1"
"""Fixed, not DBOS's hash of the code: records are found by name, so any version resumes."""
RESUME_POLL_SECONDS = 0.05


class StoreError(GatewayError):
    """The run store cannot be opened or used (a bad URL, an unreachable database)."""


def default_store_url() -> str:
    """`runs.sqlite` in the data directory (see `memory_config.data_dir`)."""
    return f"sqlite:///{(data_dir() / STORE_FILE).absolute()}"


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    status: str
    """DBOS's: PENDING (running, or stopped by a crash), SUCCESS, ERROR, CANCELLED, ENQUEUED."""
    agent: str | None
    created_ms: int | None
    updated_ms: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class RunStep:
    step_id: int
    name: str
    output: Any
    error: str | None
    started_ms: int | None
    completed_ms: int | None


class DbosJournal:
    """Answers calls recorded by an earlier execution of this workflow by their names; runs
    the others as DBOS steps named after them."""

    def __init__(self, recorded: dict[str, JsonValue]) -> None:
        self._recorded = recorded

    async def record(self, name: str, call: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        if name in self._recorded:
            return self._recorded[name]

        async def step() -> JsonValue:
            return await call()

        result: JsonValue = await DBOS.run_step_async({"name": name}, step)
        _log.info("recorded %s", name)
        return result


@dataclass(slots=True)
class _Host:
    """What the workflow body needs from the process that runs it (DBOS has one per process)."""

    client: DBOSClient
    gateway: Gateway | None = None
    hooks: Sequence[TraceHook] = ()
    stream: bool = False


_host: _Host | None = None


@DBOS.workflow(name="agent-gateway.run")
async def _run_workflow(initial: str) -> str:
    host = _host
    if host is None or host.gateway is None:
        raise StoreError("this process has no gateway to run the stored run on")
    run_id = DBOS.workflow_id
    assert run_id is not None
    # Read live (a DBOS read inside the workflow would itself be a recorded, replayed step).
    steps = await host.client.list_workflow_steps_async(run_id)
    recorded: dict[str, JsonValue] = {
        s["function_name"]: s["output"] for s in steps if s["error"] is None
    }
    for _ in range(max((s["function_id"] for s in steps), default=0)):
        DBOS.reserve_step()  # new steps go after the recorded ones, whatever order they come in
    saved = await host.client.get_event_async(run_id, STATE_EVENT, timeout_seconds=0)
    state = RunState.model_validate_json(saved if isinstance(saved, str) else initial)

    async def checkpoint(latest: RunState) -> None:
        await DBOS.set_event_async(STATE_EVENT, latest.model_dump_json())

    result = await host.gateway.resume(
        state,
        checkpoint=checkpoint,
        journal=DbosJournal(recorded),
        hooks=host.hooks,
        stream=host.stream,
    )
    return result.model_dump_json()


class DurableRuns:
    """The runs of one store, from the process that opened it."""

    def __init__(self, url: str, client: DBOSClient, *, queue: str | None) -> None:
        self.url = url
        self._client = client
        self._queue = queue
        """The queue only this process listens to (None: it runs no workflows)."""

    def use(
        self, gateway: Gateway, *, hooks: Sequence[TraceHook] = (), stream: bool = False
    ) -> None:
        """Run this process's workflows on `gateway`."""
        assert _host is not None
        _host.gateway, _host.hooks, _host.stream = gateway, hooks, stream

    async def start(self, state: RunState) -> RunResult:
        """Run `state` as a new durable run (its id is the workflow's) to the end."""
        self._need_launch()
        with SetWorkflowID(state.run_id):
            handle = await DBOS.start_workflow_async(_run_workflow, state.model_dump_json())
        return RunResult.model_validate_json(await handle.get_result())

    async def resume(self, run_id: str) -> RunResult:
        """Take over a run that stopped (its process died) and run it to the end here."""
        self._need_launch()
        info = await self.get(run_id)
        if info.status == "SUCCESS":
            handle: WorkflowHandleAsync[str] = await self._client.retrieve_workflow_async(run_id)
            return RunResult.model_validate_json(await handle.get_result())
        if info.status in ("ERROR", "CANCELLED"):
            raise UnknownRun(f"run {run_id!r} ended ({info.status}): it cannot be resumed")
        # Through a queue only this process listens to: no other process picks the run up.
        assert self._queue is not None
        await DBOS.register_queue_async(self._queue, polling_interval_sec=RESUME_POLL_SECONDS)
        handle = await DBOS.resume_workflow_async(run_id, queue_name=self._queue)
        return RunResult.model_validate_json(await handle.get_result())

    async def list(self, status: str | None = None) -> list[RunInfo]:
        found = await self._client.list_workflows_async(
            status=status, name="agent-gateway.run", sort_desc=True
        )
        return [_info(w) for w in found]

    async def get(self, run_id: str) -> RunInfo:
        found = await self._client.list_workflows_async(workflow_ids=[run_id])
        if not found:
            raise UnknownRun(f"no stored run {run_id!r} in {self.url}")
        return _info(found[0])

    async def steps(self, run_id: str) -> list[RunStep]:
        await self.get(run_id)
        return [
            RunStep(
                step_id=s["function_id"],
                name=s["function_name"],
                output=s["output"],
                error=str(s["error"]) if s["error"] is not None else None,
                started_ms=s["started_at_epoch_ms"],
                completed_ms=s["completed_at_epoch_ms"],
            )
            for s in await self._client.list_workflow_steps_async(run_id)
            if not s["function_name"].startswith("DBOS.")
        ]

    async def state(self, run_id: str) -> RunState | None:
        saved = await self._client.get_event_async(run_id, STATE_EVENT, timeout_seconds=0)
        return RunState.model_validate_json(saved) if isinstance(saved, str) else None

    async def cancel(self, run_id: str) -> None:
        await self.get(run_id)
        await self._client.cancel_workflow_async(run_id)

    def _need_launch(self) -> None:
        if self._queue is None:
            raise StoreError("the run store was opened to read only")


def _info(status: Any) -> RunInfo:
    agent: str | None = None
    inputs = getattr(status, "input", None)
    if inputs is not None:
        try:
            agent = RunState.model_validate_json(inputs["args"][0]).agent
        except Exception:  # a run of another version: its agent is unknown, the rest shows
            agent = None
    error = getattr(status, "error", None)
    return RunInfo(
        run_id=status.workflow_id,
        status=status.status,
        agent=agent,
        created_ms=status.created_at,
        updated_ms=status.updated_at,
        error=str(error) if error is not None else None,
    )


@asynccontextmanager
async def open_runs(url: str | None = None, *, launch: bool = True) -> AsyncGenerator[DurableRuns]:
    """The store at `url` (default: `default_store_url()`); with `launch`, this process runs
    workflows (DBOS launched, then destroyed on exit), else it only reads and steers them.

    Raises `StoreError` when the store cannot be opened.
    """
    global _host
    url = url or default_store_url()
    if url.startswith("sqlite:///"):
        file = anyio.Path(url.removeprefix("sqlite:///"))
        if not launch and not await file.exists():
            raise StoreError(f"no runs are stored in {url}")
        await file.parent.mkdir(parents=True, exist_ok=True)
    elif not url.startswith(("postgresql://", "postgres://")):
        raise StoreError(f"not a run store URL (sqlite:///FILE or postgresql://...): {url!r}")
    _quiet_dbos()
    queue = f"agent-gateway-{uuid.uuid4().hex}" if launch else None
    if queue is not None:
        config: DBOSConfig = {
            "name": "agent-gateway",
            "system_database_url": url,
            # Its own id: launching recovers nothing of other processes; `resume` takes a run over.
            "executor_id": queue,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
        }
        try:
            DBOS(config=config)
            DBOS.listen_queues([queue])
            DBOS.launch()
        except Exception as exc:
            DBOS.destroy(destroy_registry=False)
            raise StoreError(f"cannot open the run store {url}: {exc}") from exc
    try:
        client = DBOSClient(system_database_url=url)
    except Exception as exc:
        if launch:
            DBOS.destroy(destroy_registry=False)
        raise StoreError(f"cannot open the run store {url}: {exc}") from exc
    _host = _Host(client)
    try:
        yield DurableRuns(url, client, queue=queue)
    finally:
        _host = None
        client.destroy()
        if launch:
            DBOS.destroy(destroy_registry=False)


def _quiet_dbos() -> None:
    # DBOS logs at INFO by default (and a Conductor hint): only its warnings matter to us.
    logging.getLogger("dbos").setLevel(logging.WARNING)
