"""`serve --http` told to stop (SIGTERM, Ctrl-C) while an agent's call runs: the call gets the
grace, its client is answered what it asks next (the SDK's `Client` lists the tools after a
result), a new call is refused saying why, and one still running at the grace's end is
answered with an error result that says the gateway is shutting down, in both eras, and one
arriving after that is refused; the log has no error in it. Real processes over HTTP (and the
transports' steps in process, where timing decides)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server

from gateway import Gateway
from gateway.server.running_calls import AGAIN
from gateway.server.transports.draining import (
    CUT_OFF,
    LEAVING,
    SHUTTING_DOWN,
    Drains,
    EndsCalls,
    Requests,
)
from gateway.server.transports.http import HttpOptions, http_app, serve_http
from tests.durable.cli_runs import list_runs

from .processes import TIMES_42, http_server, write_config
from .support import ERAS, Blocker, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def _held_call_config(directory: Path) -> Path:
    """An agent whose one tool call waits for ever (while the file `hold` exists)."""
    hold = directory / "hold"
    hold.touch()
    arguments = {"log": str(directory / "calls.log"), "name": "H", "hold": str(hold)}
    script = directory / "answers.json"
    script.write_text(
        json.dumps(
            [{"tool_calls": [{"name": "logged", "arguments": arguments}]}, {"content": "never"}]
        )
    )
    config = directory / "agent-gateway.toml"
    config.write_text(
        '[tools.logged]\npython = "tests.durable_tools:logged"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["logged"]\n'
    )
    return config


def _gated_call_config(directory: Path) -> tuple[Path, Path]:
    """An agent whose one tool call waits until the named pipe `gate` is written and closed;
    the config, and the gate."""
    gate = directory / "gate"
    os.mkfifo(gate)
    arguments = {"log": str(directory / "calls.log"), "name": "G", "gate": str(gate)}
    script = directory / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "gated", "arguments": arguments}]},
                {"content": "G passed the gate"},
            ]
        )
    )
    config = directory / "agent-gateway.toml"
    config.write_text(
        '[tools.gated]\npython = "tests.durable_tools:gated"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["gated"]\n'
    )
    return config, gate


def _open_gate(gate: Path) -> None:
    with gate.open("wb"):  # the waiting call reads to the end once this closes
        pass


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["term", "ctrl-c"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_call_ending_in_the_grace_reaches_a_client_that_lists_the_tools_after_it(
    tmp_path: Path, era: str, signum: signal.Signals
) -> None:
    config, gate = _gated_call_config(tmp_path)
    results: list[types.CallToolResult] = []
    refusals: list[types.CallToolResult] = []  # new calls made during the grace
    async with http_server(config) as served:
        with anyio.fail_after(30):
            # The client never listed the tools: after a result it lists them to check it.
            async with Client(served.url, mode=era) as client:

                async def call() -> None:
                    results.append(await client.call_tool("assistant", {"prompt": "go"}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await served.line_starting("gated: waiting for G")
                    served.process.send_signal(signum)
                    await served.line_starting("agent-gateway: stopping")
                    refusals.append(await client.call_tool("assistant", {"prompt": "again"}))
                    await anyio.to_thread.run_sync(_open_gate, gate)
                code = await served.process.wait()
            await served.stderr_closed.wait()
    [result] = results
    [refused] = refusals
    assert not result.is_error
    assert result.content == [types.TextContent(text="G passed the gate")]
    assert refused.is_error
    assert refused.content == [
        types.TextContent(
            text="the call to 'assistant' was stopped: agent-gateway is shutting down and takes "
            "no new calls. Call again once the gateway is back."
        )
    ]
    assert (tmp_path / "calls.log").read_text().splitlines() == ["start G", "end G"]
    assert code == 128 + signum
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["term", "ctrl-c"])
@pytest.mark.parametrize("era", ERAS)
async def test_an_agent_call_still_running_after_the_grace_ends_with_an_error_result(
    tmp_path: Path, era: str, signum: signal.Signals
) -> None:
    results: list[types.CallToolResult] = []
    async with http_server(_held_call_config(tmp_path)) as served:
        with anyio.fail_after(30):
            async with Client(served.url, mode=era) as client:

                async def call() -> None:
                    results.append(await client.call_tool("assistant", {"prompt": "go"}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await served.line_starting("logged: holding H")
                    served.process.send_signal(signum)
                code = await served.process.wait()
            await served.stderr_closed.wait()
    [result] = results
    assert result.is_error
    [text] = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert "agent-gateway is shutting down" in text
    assert "still running" in text
    assert code == 128 + signum
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]


async def test_a_stored_runs_call_cut_off_names_the_run_its_operator_resumes(
    tmp_path: Path,
) -> None:
    """A single gateway (SQLite: no replica takes the run over) leaves the run stopped: its
    client is told so, not to wait for it, and the log says how to resume it."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    results: list[types.CallToolResult] = []
    async with http_server(_held_call_config(tmp_path), "--store", store) as served:
        with anyio.fail_after(30):
            async with Client(served.url, mode="legacy") as client:

                async def call() -> None:
                    results.append(await client.call_tool("assistant", {"prompt": "go"}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await served.line_starting("logged: holding H")
                    served.process.send_signal(signal.SIGTERM)
                code = await served.process.wait()
            await served.stderr_closed.wait()
    [run] = list_runs(store)
    run_id = run["run_id"]
    [result] = results
    assert result.is_error
    [text] = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert text.startswith("the call to 'assistant' was stopped: agent-gateway is shutting down")
    assert text.endswith(
        f"Run {run_id} is stored where it stopped: the gateway's operator can continue it "
        f"(agent-gateway runs resume {run_id})."
    )
    assert "goes on" not in text
    assert run["status"] == "stopped"
    resume = [line for line in served.stderr if "to continue it" in line]
    assert len(resume) == 1
    assert resume[0].endswith(f"agent-gateway runs resume {run_id} --store {store}")
    assert code == 128 + signal.SIGTERM
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]


async def test_serve_started_under_nohup_goes_on_serving_through_a_hangup(tmp_path: Path) -> None:
    """SIGHUP stopped `serve` however it was started: `nohup agent-gateway serve` ended when
    the terminal it was started from closed."""
    async with http_server(write_config(tmp_path, TIMES_42), under=["nohup"]) as served:
        with anyio.fail_after(30):
            served.process.send_signal(signal.SIGHUP)  # ignored, so never delivered
            async with Client(served.url) as client:
                result = await client.call_tool("assistant", {"prompt": "6 * 7?"})
            served.process.send_signal(signal.SIGTERM)
            code = await served.process.wait()
            await served.stderr_closed.wait()
    assert result.content == [types.TextContent(text="It is 42.")]
    assert code == 128 + signal.SIGTERM
    stopping = [line for line in served.stderr if "agent-gateway: stopping" in line]
    assert len(stopping) == 1, served.stderr  # for the SIGTERM alone


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_after_the_grace_ended_is_refused_not_told_it_ran_out_of_time(
    era: str,
) -> None:
    """Once the calls still running were ended, a new call never ran: it is refused as one
    during the grace is. In process: the transports' own steps (`refuse_calls`, `end_calls`)."""
    blocker = Blocker()
    server = serve(Gateway([blocker.node], []), expose_tools=True)
    assert isinstance(server, Drains)
    assert isinstance(server, EndsCalls)
    results: list[types.CallToolResult] = []
    with anyio.fail_after(30):
        async with Client(server, mode=era) as client:

            async def call() -> None:
                results.append(await client.call_tool("wait_here", {}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await blocker.started.wait()
                server.refuse_calls(SHUTTING_DOWN)
                server.end_calls(CUT_OFF)
            after = await client.call_tool("wait_here", {})
    texts = [[c.text for c in r.content if isinstance(c, types.TextContent)] for r in results]
    assert texts == [[f"the call to 'wait_here' was stopped: {CUT_OFF} {AGAIN}"]]
    assert after.is_error
    assert after.content == [
        types.TextContent(text=f"the call to 'wait_here' was stopped: {SHUTTING_DOWN} {AGAIN}")
    ]
    assert blocker.cancelled.is_set()


@pytest.mark.parametrize("era", ERAS)
async def test_the_next_call_after_one_cut_off_at_the_grace_is_refused_not_told_404(
    era: str,
) -> None:
    """A 2025-era session closed as its cut-off call's result went out, and the port within
    0.1 s: its client's next call got 404 "Session not found" (initialize again, as the spec
    reads it) or a refused connection, not the refusal a call during the grace gets. Served
    over HTTP in process with no grace (the call cut off at once); the server does all it
    would do before the client asks again."""
    blocker = Blocker()
    server = serve(Gateway([blocker.node], []), expose_tools=True)
    urls: list[str] = []
    results: list[types.CallToolResult] = []
    stop = anyio.Event()
    options = HttpOptions(host="127.0.0.1", port=0)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(_serving, server, options, stop, urls)
            async with Client(urls[0], mode=era) as client:

                async def call() -> None:
                    results.append(await client.call_tool("wait_here", {}))

                async with anyio.create_task_group() as calls:
                    calls.start_soon(call)
                    await blocker.started.wait()
                    stop.set()
                await anyio.wait_all_tasks_blocked()  # (before: the session closed meanwhile)
                results.append(await client.call_tool("wait_here", {}))
    cut_off, after = results
    assert cut_off.content == [
        types.TextContent(text=f"the call to 'wait_here' was stopped: {CUT_OFF} {AGAIN}")
    ]
    assert after.is_error
    assert after.content == [
        types.TextContent(text=f"the call to 'wait_here' was stopped: {SHUTTING_DOWN} {AGAIN}")
    ]


async def _serving(
    server: Server[Any],
    options: HttpOptions,
    stop: anyio.Event,
    urls: list[str],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """`serve_http` with no grace, started once its URL is in `urls`."""

    def ready(url: str) -> None:
        urls.append(url)
        task_status.started()

    await serve_http(server, options, on_ready=ready, stop=stop, grace=0)


async def test_a_leaving_replica_answers_a_new_request_503_for_its_balancer_to_send_on() -> None:
    """A `--stateless` replica told to go stops listening; a request that still reaches it
    (on a connection opened before) is answered 503 with `Retry-After`, never a call's error
    result: a balancer or the client sends it to another replica. In process: the layer
    `serve_http` puts in front, as it stops."""
    server = serve(Gateway([Blocker().node], []), expose_tools=True)
    app = http_app(server, HttpOptions(host="127.0.0.1", port=0, stateless=True))
    requests = Requests(app)
    requests.count()
    requests.refuse(LEAVING)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait_here"}}
    chat = {"model": "assistant", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        app.running(),
        httpx2.AsyncClient(
            transport=httpx2.ASGITransport(requests), base_url="http://127.0.0.1"
        ) as http,
    ):
        with anyio.fail_after(10):
            refused = await http.post("/mcp", json=call)
            refused_chat = await http.post("/v1/chat/completions", json=chat)
    assert refused.status_code == refused_chat.status_code == 503
    assert refused.headers["retry-after"] == refused_chat.headers["retry-after"] == "1"
    assert refused.headers["connection"] == "close"
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32000, "message": LEAVING},
    }
    assert refused_chat.json()["error"]["message"] == LEAVING
    assert "another replica takes it" in LEAVING
    assert requests.in_flight == 0
