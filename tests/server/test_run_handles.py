"""Served agent runs with a run store: a client that can be asked nothing gets a run handle
(the run waits, durable) and decides with `approve_run` / `deny_run`; `get_run` reports the
run. Clients that can be asked are asked, and their runs are stored too. Real SDK clients of
both eras against the in-process gateway on a real SQLite store."""

from __future__ import annotations

import asyncio
import base64
import json
import pickle
import re
import sqlite3
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager, closing, suppress
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRule, Decision
from gateway.config import GatewaySettings
from gateway.durable import DurableRuns, open_runs
from gateway.errors import UnknownRun
from gateway.run_state import RunOrigin, RunResult, spent
from gateway.server import build_server
from toolkits import FunctionToolkit, Toolkit, function_tool

from .support import ERAS, ProgressLog, relays_alive
from .test_keep_alive import INTERVAL, Heartbeats
from .test_served_approval import Person, Unanswered

pytestmark = pytest.mark.anyio

ORIGIN = RunOrigin(config="/srv/agent-gateway.toml", config_sha256="0" * 64, model="scripted:x")
"""How the serving process was started: what `agent-gateway resume` of its runs goes on with."""


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.noted = anyio.Event()
        """Set by the first `note`: it runs beside a gated call, which may be reported
        waiting before it ran."""

    def gateway(self, *agents: AgentSpec, nodes: Sequence[Toolkit] = ()) -> Gateway:
        async def note(text: str) -> str:
            """Note a text."""
            self.lines.append(text)
            self.noted.set()
            return f"noted {text}"

        def erase(text: str) -> str:
            """Erase a text."""
            self.lines.append(f"erased {text}")
            return f"erased {text}"

        tools = [function_tool(note), function_tool(erase)]
        return Gateway([FunctionToolkit("log", tools), *nodes], agents)


def _calls(*calls: tuple[str, str, str]) -> ScriptedAnswer:
    return ScriptedAnswer(
        tool_calls=[ScriptedCall(name=n, id=i, arguments={"text": t}) for n, i, t in calls]
    )


def _told(model: ScriptedModel, call: int) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in model.calls[call][0] if isinstance(m, ToolMessage)}


@asynccontextmanager
async def _served(
    tmp_path: Path, gateway: Gateway, **settings: Any
) -> AsyncGenerator[tuple[Any, DurableRuns]]:
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        runs.use(gateway)
        settled = GatewaySettings(**settings)
        server, _router = build_server(gateway, settled, runs=runs, origin=ORIGIN)
        yield server, runs


def _structured(result: types.CallToolResult) -> dict[str, Any]:
    structured: Any = result.structured_content
    assert isinstance(structured, dict), result
    return cast(dict[str, Any], structured)


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_that_cannot_be_asked_gets_a_run_handle_and_approves_with_a_tool(
    era: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = Log()
    model = ScriptedModel([_calls(("note", "a", "A"), ("erase", "b", "B")), "done"])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with _served(tmp_path, log.gateway(spec)) as (server, runs):
        async with Client(server, mode=era) as client:  # declares no elicitation
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"get_run", "approve_run", "deny_run"} <= tools
            handle = await client.call_tool("assistant", {"prompt": "go"})
            assert not handle.is_error, handle.content
            run = _structured(handle)["run"]
            run_id = run["run_id"]
            assert run["status"] == "waiting_approval"
            assert run["waiting"] == [
                {"call": "b", "tool": "erase", "input": {"text": "B"}, "agents": ["assistant"]}
            ]
            text = handle.content[0]
            assert isinstance(text, types.TextContent)
            assert f"Run {run_id} is waiting" in text.text
            assert "approve_run" in text.text
            # The store is the operator's: named in the gateway's log, never to the client.
            assert text.text.endswith(
                f"its operator can run: agent-gateway runs approve {run_id} b"
            )
            assert str(tmp_path) not in handle.model_dump_json()
            store = f"sqlite:///{tmp_path / 'runs.sqlite'}"  # as `runs approve` must name it
            assert (
                f"run {run_id} waits for a person's approval of b (erase): agent-gateway runs "
                f"approve|deny {run_id} b --store {store}"
            ) in caplog.messages
            with anyio.fail_after(10):
                await log.noted.wait()
            assert log.lines == ["A"]  # the other call of the step ran; the gated one waits
            assert (await runs.get(run_id)).status == "waiting_approval"
            stored = await runs.state(run_id)
            assert stored is not None
            assert stored.origin == ORIGIN

            seen = _structured(await client.call_tool("get_run", {"run_id": run_id}))
            assert seen["status"] == "waiting_approval"
            assert seen["waiting"][0]["tool"] == "erase"
            assert "output" not in seen

            approved = await client.call_tool(
                "approve_run", {"run_id": run_id, "call": "b", "message": "only this once"}
            )
            assert approved.content == [types.TextContent(text="done")]
            assert _structured(approved)["status"] == "succeeded"
            finished = _structured(await client.call_tool("get_run", {"run_id": run_id}))
        assert finished["status"] == "succeeded"
        assert finished["output"] == "done"
        assert (await runs.get(run_id)).status == "succeeded"
    assert sorted(log.lines) == ["A", "erased B"]  # each call ran once
    assert _told(model, 1) == {
        "a": "noted A",
        "b": "erased B\n\nThe user approved this call and said: only this once",
    }


@pytest.mark.parametrize("era", ERAS)
async def test_deny_run_tells_the_model_with_the_message_and_the_run_goes_on(
    era: str, tmp_path: Path
) -> None:
    log = Log()
    model = ScriptedModel([_calls(("erase", "b", "B")), "I left B alone."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with (
        _served(tmp_path, log.gateway(spec)) as (server, _runs),
        Client(server, mode=era) as client,
    ):
        handle = await client.call_tool("assistant", {"prompt": "go"})
        run_id = _structured(handle)["run"]["run_id"]
        denied = await client.call_tool("deny_run", {"run_id": run_id, "message": "B stays"})
        assert denied.content == [types.TextContent(text="I left B alone.")]
        again = await client.call_tool("deny_run", {"run_id": run_id})
        assert again.is_error  # nothing waits any more
    assert log.lines == []
    assert _told(model, 1) == {
        "b": "The user rejected the tool call to erase; it did not run. The user said: B stays"
    }


async def test_runs_decided_from_the_store_that_end_unfollowed_leave_nothing_here(
    tmp_path: Path,
) -> None:
    """A run a client got a handle of, decided from the store (as `runs approve` does) and
    ended with nobody following it, leaves nothing in the serving process."""
    log = Log()
    model = ScriptedModel([_calls(("erase", "b", "B")), "done"] * 4)
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    before = relays_alive()  # other tests'
    async with (
        _served(tmp_path, log.gateway(spec)) as (server, runs),
        Client(server) as client,
    ):
        for _ in range(4):
            handle = await client.call_tool("assistant", {"prompt": "go"})
            run_id = _structured(handle)["run"]["run_id"]
            [waiting] = await runs.waiting(run_id)
            await runs.decide(run_id, waiting, Decision(approved=True), by="the operator")
            with anyio.fail_after(10), suppress(UnknownRun):  # UnknownRun: it ended already
                assert isinstance(await runs.follow(run_id, pause=False), RunResult)
        assert relays_alive() - before <= 1  # the last run's, if its workflow still unwinds
    assert log.lines == ["erased B"] * 4


async def test_an_unknown_run_is_an_error_result(tmp_path: Path) -> None:
    spec = AgentSpec("assistant", ScriptedModel(["hi"]), tools=["log"])
    async with (
        _served(tmp_path, Log().gateway(spec)) as (server, _runs),
        Client(server) as client,
    ):
        result = await client.call_tool("get_run", {"run_id": "nope"})
    assert result.is_error
    assert result.content == [types.TextContent(text="no run 'nope' started by this client")]


def _as_an_older_version_stored_it(store: Path, run_id: str) -> None:
    """The run's events pickled, as an older agent-gateway stored them."""
    with closing(sqlite3.connect(store)) as db:
        rows = db.execute(
            "SELECT rowid, value FROM workflow_events WHERE workflow_uuid = ?", (run_id,)
        ).fetchall()
        for rowid, value in rows:
            pickled = base64.b64encode(pickle.dumps(json.loads(value))).decode()
            db.execute(
                "UPDATE workflow_events SET value = ?, serialization = 'py_pickle' WHERE rowid = ?",
                (pickled, rowid),
            )
        db.commit()


async def test_a_run_an_older_version_stored_is_an_error_result_and_a_warning_for_the_operator(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = AgentSpec(
        "assistant",
        ScriptedModel([_calls(("erase", "b", "B")), "done"]),
        tools=["log"],
        approval=ApprovalRule(["erase"]),
    )
    async with (
        _served(tmp_path, Log().gateway(spec)) as (server, _runs),
        Client(server) as client,
    ):
        handle = await client.call_tool("assistant", {"prompt": "go"})
        run_id = _structured(handle)["run"]["run_id"]
        _as_an_older_version_stored_it(tmp_path / "runs.sqlite", run_id)
        caplog.clear()
        results = [
            await client.call_tool(tool, {"run_id": run_id}) for tool in ("get_run", "approve_run")
        ]
    told = (
        f"run {run_id} cannot be read here: it was stored by an older agent-gateway, in a "
        "format this gateway reads only if its operator allows it"
    )
    for result in results:  # a tool's error, and nothing the client could not do itself
        assert result.is_error
        assert result.content == [types.TextContent(text=told)]
    warned = [r for r in caplog.records if r.name.endswith("run_handles")]
    assert [(r.levelname, r.exc_info) for r in warned] == [("WARNING", None)] * 2
    for record, tool in zip(warned, ("get_run", "approve_run"), strict=True):
        assert record.getMessage().startswith(
            f"{tool} of run {run_id}: run {run_id} is stored in Python's pickle format"
        )
        assert "read_pickled = true" in record.getMessage()  # what the operator can do
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_that_can_be_asked_is_asked_and_its_run_is_stored(
    era: str, tmp_path: Path
) -> None:
    log = Log()
    model = ScriptedModel([_calls(("note", "a", "A"), ("erase", "b", "B")), "done"])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    person = Person(approve=True)
    async with _served(tmp_path, log.gateway(spec)) as (server, runs):
        async with Client(server, mode=era, elicitation_callback=person) as client:
            result = await client.call_tool("assistant", {"prompt": "go"})
        assert result.content == [types.TextContent(text="done")]
        assert person.asked == [
            'Agent \'assistant\' wants to call erase with {"text": "B"}. Allow it?'
        ]
        (stored,) = await runs.list()
        assert stored.status == "succeeded"
    assert sorted(log.lines) == ["A", "erased B"]
    assert _told(model, 1) == {"a": "noted A", "b": "erased B"}


@pytest.mark.parametrize("era", ERAS)
async def test_a_declined_form_reaches_a_stored_run_as_a_decline(era: str, tmp_path: Path) -> None:
    model = ScriptedModel([_calls(("erase", "b", "B")), "I left B alone."])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    declines = Unanswered(types.ElicitResult(action="decline"))
    log = Log()
    async with (
        _served(tmp_path, log.gateway(spec)) as (server, _runs),
        Client(server, mode=era, elicitation_callback=declines) as client,
    ):
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="I left B alone.")]
    assert log.lines == []
    # Through the store's decision message, as what it was: not a person's words.
    assert _told(model, 1) == {"b": "The tool call to erase did not run: the user declined."}


async def test_a_run_handle_of_a_sub_agent_resumes_it_in_place(tmp_path: Path) -> None:
    log = Log()
    model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[ScriptedCall(name="leaf", id="l1", arguments={"prompt": "erase W"})]
            ),
            _calls(("erase", "w1", "W")),
            "leaf: erased W",
            "lead: the leaf erased W",
        ]
    )
    lead = AgentSpec("lead", model, tools=["leaf"])
    leaf = AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with (
        _served(tmp_path, log.gateway(lead, leaf)) as (server, _runs),
        Client(server) as client,
    ):
        handle = await client.call_tool("lead", {"prompt": "go"})
        run = _structured(handle)["run"]
        assert [(w["call"], w["agents"]) for w in run["waiting"]] == [("l1/w1", ["lead", "leaf"])]
        approved = await client.call_tool("approve_run", {"run_id": run["run_id"]})
    assert approved.content == [types.TextContent(text="lead: the leaf erased W")]
    assert log.lines == ["erased W"]
    assert len(model.calls) == 4  # no model call was made twice


def _lead_mid_leaf(
    leaf_calls: ScriptedAnswer, *, leaf_tools: Sequence[str] = ("log",)
) -> list[AgentSpec]:
    """`lead` calls `mid`, which calls `leaf`, which makes `leaf_calls` (`erase` needs a
    person's approval)."""
    model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[ScriptedCall(name="mid", id="m1", arguments={"prompt": "ask"})]
            ),
            ScriptedAnswer(
                tool_calls=[ScriptedCall(name="leaf", id="l1", arguments={"prompt": "erase W"})]
            ),
            leaf_calls,
            "leaf: erased W",
            "mid: the leaf erased W",
            "lead: done",
        ]
    )
    return [
        AgentSpec("lead", model, tools=["mid"]),
        AgentSpec("mid", model, tools=["leaf"]),
        AgentSpec("leaf", model, tools=list(leaf_tools), approval=ApprovalRule(["erase"])),
    ]


AFTER_THE_APPROVAL = [
    "mid > leaf: tool erase: running",
    "mid > leaf: tool erase: done",
    "mid > leaf: model scripted: thinking",
    "mid > leaf: model scripted: answered",
    "mid: tool leaf: done",
    "mid: model scripted: thinking",
    "mid: model scripted: answered",
    "tool mid: done",
    "model scripted: thinking",
    "model scripted: answered",
    "agent lead: finished",
]
"""The progress of `_lead_mid_leaf`'s run once `erase` is approved: each call named by the
agents it is under, as the run's first request names them."""


def _messages(progress: ProgressLog) -> list[str]:
    return [re.sub(r" in \d+ ms", "", m) for m in progress.messages]


@pytest.mark.parametrize("era", ERAS)
async def test_the_progress_after_an_approval_names_the_sub_agents_as_before_it(
    era: str, tmp_path: Path
) -> None:
    """A 2026-07-28 client's retry follows the stored run on from inside `leaf`. Was: its
    progress named no agent (`tool erase: running`), as if `lead` made the call."""
    log = Log()
    gateway = log.gateway(*_lead_mid_leaf(_calls(("erase", "w1", "W"))))
    progress = ProgressLog()
    async with (
        _served(tmp_path, gateway) as (server, _runs),
        Client(server, mode=era, elicitation_callback=Person(approve=True)) as client,
    ):
        result = await client.call_tool("lead", {"prompt": "go"}, progress_callback=progress)
    assert result.content == [types.TextContent(text="lead: done")]
    messages = _messages(progress)
    assert "mid > leaf: model scripted: answered, calling erase" in messages  # before the round
    ran = max(i for i, m in enumerate(messages) if m.endswith("tool erase: running"))
    assert messages[ran:] == AFTER_THE_APPROVAL
    assert log.lines == ["erased W"]


@pytest.mark.parametrize("era", ERAS)
async def test_approve_run_names_the_sub_agents_the_run_goes_on_in(
    era: str, tmp_path: Path
) -> None:
    log = Log()
    gateway = log.gateway(*_lead_mid_leaf(_calls(("erase", "w1", "W"))))
    progress = ProgressLog()
    async with (
        _served(tmp_path, gateway) as (server, _runs),
        Client(server, mode=era) as client,  # declares no elicitation: gets a run handle
    ):
        run_id = _structured(await client.call_tool("lead", {"prompt": "go"}))["run"]["run_id"]
        approved = await client.call_tool(
            "approve_run", {"run_id": run_id}, progress_callback=progress
        )
    assert approved.content == [types.TextContent(text="lead: done")]
    assert _messages(progress) == AFTER_THE_APPROVAL
    assert log.lines == ["erased W"]


async def test_approve_run_hears_of_a_call_under_way_before_it_followed(tmp_path: Path) -> None:
    """The heartbeat names a sub-agent's call that began before `approve_run` followed the run,
    and still runs once the approved call ended."""
    beats = Heartbeats("mid > leaf: tool wait_for_it: still running")

    @function_tool
    async def wait_for_it() -> str:
        """Returns once the client has heard the heartbeat."""
        await beats.enough.wait()
        return "done"

    both = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="wait_for_it", id="s1"),
            ScriptedCall(name="erase", id="w1", arguments={"text": "W"}),
        ]
    )
    log = Log()
    agents = _lead_mid_leaf(both, leaf_tools=("log", "waiting"))
    gateway = log.gateway(*agents, nodes=[FunctionToolkit("waiting", [wait_for_it])])
    async with (
        _served(tmp_path, gateway, progress_interval=INTERVAL) as (server, _runs),
        Client(server, mode="legacy") as client,  # declares no elicitation: gets a run handle
    ):
        run_id = _structured(await client.call_tool("lead", {"prompt": "go"}))["run"]["run_id"]
        with anyio.fail_after(10):
            approved = await client.call_tool(
                "approve_run", {"run_id": run_id}, progress_callback=beats
            )
    assert approved.content == [types.TextContent(text="lead: done")]
    assert log.lines == ["erased W"]


async def test_a_run_handle_says_what_the_run_spent_so_far_its_sub_agents_too(
    tmp_path: Path,
) -> None:
    """Was `{}`: the handle of a run waiting inside a sub-agent after two model calls."""
    log = Log()
    ask = ScriptedCall(name="leaf", id="l1", arguments={"prompt": "erase W"})
    model = ScriptedModel([ScriptedAnswer(tool_calls=[ask]), _calls(("erase", "w1", "W"))])
    lead = AgentSpec("lead", model, tools=["leaf"])
    leaf = AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"]))
    async with (
        _served(tmp_path, log.gateway(lead, leaf)) as (server, runs),
        Client(server, mode="legacy") as client,  # declares no elicitation
    ):
        handle = _structured(await client.call_tool("lead", {"prompt": "go"}))
        state = await runs.state(handle["run"]["run_id"])
    assert state is not None
    assert handle["usage"] == spent(state).model_dump(mode="json")  # as `run --json` says it
    assert handle["usage"]["requests"] == 2
    assert handle["usage"]["input_tokens"] > 0


def _lasting_tasks() -> int:
    # A waiting workflow sets up its DBOS recv in a worker thread, a task of its own for the
    # moment that takes (longer on a loaded machine): not something a run holds while it waits.
    return sum(getattr(t.get_coro(), "__name__", "") != "to_thread" for t in asyncio.all_tasks())


async def test_a_run_waiting_for_a_decision_with_nobody_asking_is_one_task(tmp_path: Path) -> None:
    # What a served run holds while it waits (days, maybe): its workflow's own task, and no
    # task group of a single call, nor one for asking nobody.
    log = Log()
    answers = [_calls(("erase", f"c{n}", f"T{n}")) for n in range(6)]
    spec = AgentSpec(
        "assistant", ScriptedModel(answers), tools=["log"], approval=ApprovalRule(["erase"])
    )
    async with (
        _served(tmp_path, log.gateway(spec)) as (server, runs),
        Client(server, mode="legacy") as client,  # declares no elicitation
    ):

        async def waiting_run() -> str:
            handle = await client.call_tool("assistant", {"prompt": "go"})
            run = _structured(handle)["run"]
            assert run["status"] == "waiting_approval"
            return run["run_id"]

        first = await waiting_run()
        tasks = _lasting_tasks()
        others = [await waiting_run() for _ in range(5)]
        assert _lasting_tasks() - tasks == 5
        for run_id in [first, *others]:
            assert (await runs.get(run_id)).status == "waiting_approval"
    assert log.lines == []


async def test_a_run_that_ends_while_a_client_approves_it_is_told_in_the_clients_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run is cancelled (by the operator, say) just after approve_run looked at its calls:
    # the client hears what became of its run, not the store's URL nor a command line.
    log = Log()
    spec = AgentSpec(
        "assistant",
        ScriptedModel([_calls(("erase", "c1", "X"))]),
        tools=["log"],
        approval=ApprovalRule(["erase"]),
    )
    async with (
        _served(tmp_path, log.gateway(spec)) as (server, runs),
        Client(server, mode="legacy") as client,
    ):
        run_id = _structured(await client.call_tool("assistant", {"prompt": "go"}))["run"]["run_id"]
        looked = runs.waiting

        async def cancelled_meanwhile(asked: str) -> Any:
            waiting = await looked(asked)
            await runs.cancel(asked)
            with anyio.fail_after(10):
                while (await runs.get(asked)).status != "cancelled":
                    await anyio.wait_all_tasks_blocked()
            return waiting

        monkeypatch.setattr(runs, "waiting", cancelled_meanwhile)
        result = await client.call_tool("approve_run", {"run_id": run_id})
    assert result.is_error
    assert result.content == [
        types.TextContent(text=f"run {run_id} has ended (cancelled): get_run shows it")
    ]
    assert log.lines == []
