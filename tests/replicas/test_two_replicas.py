"""Two `serve --http --stateless` replicas on one PostgreSQL behind a real nginx (round robin):
a run started through one is approved and finished through the other; a replica killed
mid-run has its run finished by the other, no recorded call made again."""

from __future__ import annotations

import json
import sys
import uuid
from contextlib import suppress
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from tests.servers.databases import free_port
from tests.servers.openai_stub import openai_stub

from .cluster import cli, cluster, config, runs_json

# Two replicas, nginx and a few CLI processes, each importing DBOS, on 2 shared cores.
pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

TOOLS = '[tools.logged]\npython = "tests.durable_tools:logged"\n'


@pytest.fixture
def store(postgres_url: str) -> str:
    return f"{postgres_url.rsplit('/', 1)[0]}/replicas_{uuid.uuid4().hex[:12]}"


async def never_asked(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    raise AssertionError("the rounds are driven by the test")


def _agent(model: str, *, gated: bool) -> str:
    gate = 'require_approval = ["logged"]\n' if gated else ""
    return f'{TOOLS}[agents.assistant]\nmodel = "{model}"\ntools = ["logged"]\n{gate}'


async def test_a_run_started_on_one_replica_is_approved_and_finished_on_the_other(
    tmp_path: Path, store: str
) -> None:
    log = tmp_path / "calls.log"
    call = {"name": "logged", "arguments": {"log": str(log), "name": "A"}}
    port = free_port()
    with openai_stub([call, "A is done"]) as model:
        path = config(tmp_path, port, _agent(model.spec, gated=True), store=store)
        async with (
            cluster(path, port) as gateways,
            gateways.http() as http,
            Client(
                streamable_http_client(gateways.url, http_client=http),
                elicitation_callback=never_asked,
            ) as client,
        ):
            first = await client.session.call_tool(
                "assistant", {"prompt": "use A"}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult), first
            assert first.request_state is not None
            [key] = first.input_requests or {}
            assert key.startswith("approve ")

            # Kept in the store while the client thinks: any process sees it.
            [run] = runs_json(store)
            assert run["agent"] == "assistant"
            assert run["status"] == "waiting_approval"
            assert log.exists() is False  # the gated call has not run

            yes = types.ElicitResult(action="accept", content={"approve": True})
            said: list[str] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                said.append(message or "")

            done = await client.session.call_tool(
                "assistant",
                {"prompt": "use A"},
                input_responses={key: yes},
                request_state=first.request_state,
                allow_input_required=True,
                progress_callback=on_progress,
            )
            started_on, finished_on = gateways.answered("tools/call")
        assert isinstance(done, types.CallToolResult), done
        assert done.content == [types.TextContent(text="A is done")]
        assert started_on != finished_on  # round robin: the retry reached the other replica
        # ... which followed the run through the store, telling the client each recorded call.
        assert [m.split(" in ")[0] for m in said] == [
            "tool logged: done",
            "model on another replica: answered",
        ], said
        assert len(model.requests) == 2  # the first model call was not made again
    assert log.read_text().splitlines() == ["start A", "end A"]
    [run] = runs_json(store)
    assert run["status"] == "succeeded"
    shown = cli("runs", "show", str(run["run_id"]), "--json", "--store", store)
    assert shown.returncode == 0, shown.stderr
    names = [step["name"] for step in json.loads(shown.stdout)["steps"]]
    assert names.count("tool 0 call_1") == 1


@pytest.mark.parametrize("ended", ["kill", "terminate"])
async def test_a_replica_ended_mid_run_has_its_run_finished_by_the_other(
    tmp_path: Path, store: str, ended: str
) -> None:
    """Killed (SIGKILL: its lock goes with it) or told to go (SIGTERM: it interrupts its run,
    leaves it in flight, and lets its lock go last), the replica's run is finished by the
    other."""
    log = tmp_path / "calls.log"
    call = {"name": "logged", "arguments": {"log": str(log), "name": "A"}}
    port = free_port()
    # The second model call is held: the replica running the run is killed there, after
    # the tool call was recorded.
    with openai_stub([call, "A is done", "A is done"], hold_at=2) as model:
        path = config(tmp_path, port, _agent(model.spec, gated=False), store=store)
        async with cluster(path, port) as gateways:
            lost: list[BaseException] = []
            line = ""
            taken: list[str] = []

            async def call_and_lose_it() -> None:
                async with (
                    gateways.http() as http,
                    Client(streamable_http_client(gateways.url, http_client=http)) as client,
                ):
                    try:
                        await client.call_tool("assistant", {"prompt": "use A"})
                    except Exception as exc:  # its replica dies under it
                        lost.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_and_lose_it)
                assert await anyio.to_thread.run_sync(model.holding.wait, 60)
                with anyio.fail_after(30):
                    running = await gateways.saying("recorded tool")
                [other] = [r for r in gateways.replicas if r is not running]
                await (running.kill() if ended == "kill" else running.terminate())
                with anyio.fail_after(60):
                    line = await other.said("(taken over) finished")
                taken = [x for x in other.lines if "goes on here" in x]
                tg.cancel_scope.cancel()
        assert len(model.requests) == 3  # only the call in flight at the kill was asked again
    assert log.read_text().splitlines() == ["start A", "end A"]  # recorded: not run again
    [run] = runs_json(store)
    assert run["status"] == "succeeded"
    assert str(run["run_id"]) in line
    result = cli("runs", "show", str(run["run_id"]), "--json", "--store", store)
    assert json.loads(result.stdout)["result"]["items"][0]["output"] == "A is done"
    # The operator's log tells a crash from a rolling restart.
    [said] = taken
    if ended == "kill":
        assert " WARNING " in said
        assert f"died: run {run['run_id']} goes on here" in said
    else:
        assert " INFO " in said
        assert f"left (told to go): run {run['run_id']} goes on" in said


async def test_a_run_of_a_dead_replica_taken_on_another_config_is_said(
    tmp_path: Path, store: str
) -> None:
    """Replicas on configs that differ (a roll-out half done): the run of one that died is
    taken by the other once no replica on its config did, with a WARNING naming the run
    and both configs, as its agents and tools may differ."""
    log = tmp_path / "calls.log"
    call = {"name": "logged", "arguments": {"log": str(log), "name": "A"}}
    port = free_port()
    with openai_stub([call, "A is done", "A is done"], hold_at=2) as model:
        first = config(tmp_path, port, _agent(model.spec, gated=False), store=store)
        second = tmp_path / "newer.toml"
        second.write_text(first.read_text() + "# the next version\n")
        on_first, said = False, ""  # whether the run started on `first`; what the other said
        async with cluster([first, second], port) as gateways:

            async def call_and_lose_it() -> None:
                async with (
                    gateways.http() as http,
                    Client(streamable_http_client(gateways.url, http_client=http)) as client,
                ):
                    with suppress(Exception):  # its replica dies under it
                        await client.call_tool("assistant", {"prompt": "use A"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_and_lose_it)
                assert await anyio.to_thread.run_sync(model.holding.wait, 60)
                with anyio.fail_after(30):
                    running = await gateways.saying("recorded tool")
                [other] = [r for r in gateways.replicas if r is not running]
                on_first = running is gateways.replicas[0]  # one replica on each, in order
                await running.kill()
                with anyio.fail_after(60):
                    await other.said("(taken over) finished")
                [said] = [x for x in other.lines if "goes on here" in x]
                tg.cancel_scope.cancel()
    [run] = runs_json(store)
    assert run["status"] == "succeeded"
    started_on, taken_on = (first, second) if on_first else (second, first)
    started_on, taken_on = started_on.resolve(), taken_on.resolve()
    assert " WARNING " in said
    assert f"died: run {run['run_id']} goes on here, on another config than it started on" in said
    assert f"it started on config {started_on} (sha256 " in said
    assert f"this replica serves {taken_on} (sha256 " in said
    assert said.endswith("its agents and tools may differ")


async def test_a_replica_told_to_go_during_a_tool_call_leaves_the_call_to_the_other(
    tmp_path: Path, store: str
) -> None:
    """SIGTERM while an MCP server's tool call runs past the grace: the call had no outcome
    (its server stopped under it), so the run is not answered with that error but left in
    flight, and the other replica makes the call again and finishes the run."""
    log, hold = tmp_path / "calls.log", tmp_path / "hold"
    hold.touch()
    call = {"name": "slow__logged", "arguments": {"log": str(log), "name": "A", "hold": str(hold)}}
    server = Path(__file__).parent.parent / "servers" / "logged_stdio.py"
    body = (
        f'[mcpServers.slow]\ncommand = "{sys.executable}"\nargs = ["{server}"]\n'
        '[agents.assistant]\nmodel = "{model}"\ntools = ["slow"]\n'
    )
    port = free_port()
    with openai_stub([call, "A is done"]) as model:
        path = config(tmp_path, port, body.replace("{model}", model.spec), store=store)
        async with cluster(path, port) as gateways:
            line = ""
            told: list[str] = []
            said_by_it: list[str] = []

            async def call_and_lose_it() -> None:
                async with (
                    gateways.http() as http,
                    Client(streamable_http_client(gateways.url, http_client=http)) as client,
                ):
                    with suppress(Exception):  # its replica goes under it
                        result = await client.call_tool("assistant", {"prompt": "use A"})
                        told.extend(
                            c.text for c in result.content if isinstance(c, types.TextContent)
                        )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_and_lose_it)
                with anyio.fail_after(60):
                    running = await gateways.saying("logged: holding A")
                [other] = [r for r in gateways.replicas if r is not running]
                hold.unlink()  # the call made again on the other replica goes through
                await running.terminate()  # past the grace: the held call is cut off
                said_by_it.extend(running.lines)
                with anyio.fail_after(60):
                    line = await other.said("(taken over) finished")
                tg.cancel_scope.cancel()
        assert len(model.requests) == 2  # not told of the cut-off call; its call not asked again
    assert log.read_text().splitlines() == ["start A", "start A", "end A"]
    [run] = runs_json(store)
    assert run["status"] == "succeeded"
    assert str(run["run_id"]) in line
    # Its client was told the run goes on (it did), not to have the operator resume it.
    [text] = told
    assert f"Run {run['run_id']} is stored and goes on in another gateway serving its store" in text
    assert said_by_it
    assert not [x for x in said_by_it if "to continue it" in x]
    result = cli("runs", "show", str(run["run_id"]), "--json", "--store", store)
    assert json.loads(result.stdout)["result"]["items"][0]["output"] == "A is done"
