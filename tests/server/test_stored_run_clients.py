"""A served agent's stored run goes on whatever its client does: a decision from the store
(`runs approve`, `approve_run` from another session) counts while the client is shown the
approval form, which is then withdrawn; a client that is killed meanwhile holds nothing up;
a 2026-07-28 client that goes away leaves the run going on, while a 2025-11-25 client's
cancel stops it (stored). Real `serve --http --store` processes, real SDK clients over HTTP
on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, cast

import anyio
import mcp_types as types
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import Client
from mcp.client.session import ClientRequestContext

from tests.durable.cli_runs import cli, cli_env, list_runs

from .processes import REPO, http_server
from .test_keep_alive import Heartbeats

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
    '[tools.slow]\npython = "tests.durable_tools:gated"\n'
)


def _config(directory: Path, answers: list[dict[str, Any]]) -> Path:
    script = directory / "answers.json"
    script.write_text(json.dumps(answers))
    config = directory / "agent-gateway.toml"
    config.write_text(
        TOOLS + f'[agents.assistant]\nmodel = "scripted:{script}"\n'
        'tools = ["logged", "guarded", "slow"]\nrequire_approval = ["guarded"]\n'
    )
    return config


def _gated(directory: Path, log: Path) -> Path:
    call = {"name": "guarded", "id": "b", "arguments": {"log": str(log), "name": "B"}}
    return _config(directory, [{"tool_calls": [call]}, {"content": "B is done"}])


class Form:
    """The client's user, shown the approval form: never answers; notes when it is shown and
    when the server withdraws it."""

    def __init__(self) -> None:
        self.shown = anyio.Event()
        self.withdrawn = anyio.Event()

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.shown.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.withdrawn.set()
            raise
        raise AssertionError("never answered")


async def test_runs_approve_decides_while_the_client_is_shown_the_form(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    form = Form()
    results: list[types.CallToolResult] = []
    answered = anyio.Event()
    async with (
        http_server(_gated(tmp_path, log), "--store", store) as served,
        Client(served.url, mode="legacy", elicitation_callback=form) as client,
        anyio.create_task_group() as tg,
    ):

        async def call() -> None:
            results.append(await client.call_tool("assistant", {"prompt": "go"}))
            answered.set()

        tg.start_soon(call)
        with anyio.fail_after(30):
            await form.shown.wait()
        [run] = list_runs(store)
        approved = cli("runs", "approve", run["run_id"], "b", "--store", store)
        assert approved.returncode == 0, approved.stderr
        with anyio.fail_after(30):
            await form.withdrawn.wait()  # the decision came from elsewhere: the form goes
            await answered.wait()
    assert results[0].content == [types.TextContent(text="B is done")]
    assert log.read_text().splitlines() == ["start B", "end B"]
    assert list_runs(store)[0]["status"] == "succeeded"


async def test_a_2025_client_shown_the_form_hears_progress_while_its_person_thinks(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    config = _gated(tmp_path, log)
    config.write_text("[gateway]\nprogress_interval = 0.2\n" + config.read_text())
    beats = Heartbeats("tool guarded: waiting for a person's approval")

    async def person(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        await beats.enough.wait()  # thinking it over
        return types.ElicitResult(action="accept", content={"approve": True})

    async with (
        http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served,
        Client(served.url, mode="legacy", elicitation_callback=person) as client,
    ):
        with anyio.fail_after(30):
            result = await client.call_tool("assistant", {"prompt": "go"}, progress_callback=beats)
    assert result.content == [types.TextContent(text="B is done")]
    assert log.read_text().splitlines() == ["start B", "end B"]


async def test_a_killed_clients_form_holds_up_no_decision_of_another_session(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with http_server(_gated(tmp_path, log), "--store", store) as served:
        asking = await anyio.open_process(
            [sys.executable, "-m", "tests.server.asking_client", served.url],
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=cli_env(),
        )
        try:
            assert asking.stdout is not None
            with anyio.fail_after(30):
                said = ""
                async for chunk in TextReceiveStream(asking.stdout):
                    said += chunk
                    if "asked" in said:
                        break
        finally:
            asking.kill()  # no DELETE, no cancel: its session stays open on the server
            with anyio.CancelScope(shield=True):
                await asking.wait()
                await asking.aclose()
        [run] = list_runs(store)
        async with Client(served.url, mode="legacy") as other:
            with anyio.fail_after(30):
                approved = await other.call_tool(
                    "approve_run", {"run_id": run["run_id"], "call": "b"}
                )
    assert approved.content == [types.TextContent(text="B is done")]
    assert log.read_text().splitlines() == ["start B", "end B"]


class Slow:
    """The `slow` tool's call `s`: the test holds its FIFO open, and it ends when released."""

    def __init__(self, directory: Path) -> None:
        self.log = directory / "calls.log"
        self.gate = directory / "gate"
        os.mkfifo(self.gate)
        self._writer: BinaryIO | None = None

    def answers(self) -> list[dict[str, Any]]:
        arguments = {"log": str(self.log), "name": "S", "gate": str(self.gate)}
        return [
            {"tool_calls": [{"name": "slow", "id": "s", "arguments": arguments}]},
            {"content": "S is done"},
        ]

    async def started(self) -> None:
        """Once the call waits to be released."""
        with anyio.fail_after(30):
            self._writer = await anyio.to_thread.run_sync(
                partial(open, self.gate, "wb"), abandon_on_cancel=True
            )

    def release(self) -> None:
        assert self._writer is not None
        self._writer.close()


async def _until(client: Client, run_id: str, status: str) -> dict[str, Any]:
    """Polls get_run (each poll a round trip) until the run has `status`."""
    with anyio.fail_after(30):
        while True:
            result = await client.call_tool("get_run", {"run_id": run_id})
            report = cast(dict[str, Any], result.structured_content)
            if report["status"] == status:
                return report
            assert report["status"] == "running", report


async def test_a_2026_client_that_goes_away_leaves_its_run_going_on(tmp_path: Path) -> None:
    """On 2026-07-28 a client cancels only by closing its request's stream, as a client that
    dies or loses its network does: the run goes on, and get_run gives its answer later."""
    slow = Slow(tmp_path)
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    config = _config(tmp_path, slow.answers())
    async with http_server(config, "--store", store) as served:
        async with Client(served.url, mode="auto") as client, anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "assistant", {"prompt": "go"})
            await slow.started()
            tg.cancel_scope.cancel()  # the client goes: its request's stream closes
        [run] = list_runs(store)
        assert run["status"] == "running"
        slow.release()
        async with Client(served.url, mode="auto") as later:
            report = await _until(later, run["run_id"], "succeeded")
    assert report["output"] == "S is done"
    assert slow.log.read_text().splitlines() == ["start S", "end S"]


async def test_a_2026_client_stops_its_run_for_good_with_cancel_run(tmp_path: Path) -> None:
    slow = Slow(tmp_path)
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    config = _config(tmp_path, slow.answers())
    async with http_server(config, "--store", store) as served:
        async with Client(served.url, mode="auto") as client, anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "assistant", {"prompt": "go"})
            await slow.started()
            [run] = list_runs(store)
            result = await client.call_tool("cancel_run", {"run_id": run["run_id"]})
            assert not result.is_error, result
            report = cast(dict[str, Any], result.structured_content)
            assert report["status"] == "cancelled"
            again = await client.call_tool("cancel_run", {"run_id": run["run_id"]})
            assert again.is_error
            assert isinstance(text := again.content[0], types.TextContent)
            assert text.text == f"run {run['run_id']} has ended (cancelled): get_run shows it"
            tg.cancel_scope.cancel()
        slow.release()
        [run] = list_runs(store)
    assert run["status"] == "cancelled"
    assert slow.log.read_text().splitlines() == ["start S"]  # the call in flight was stopped


async def test_a_2025_clients_cancel_stops_its_run_which_stays_stored(tmp_path: Path) -> None:
    slow = Slow(tmp_path)
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    config = _config(tmp_path, slow.answers())
    async with http_server(config, "--store", store) as served:
        async with Client(served.url, mode="legacy") as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "assistant", {"prompt": "go"})
                await slow.started()
                tg.cancel_scope.cancel()  # notifications/cancelled
            [run] = list_runs(store)
            report = await _until(client, run["run_id"], "stopped")
        slow.release()
    assert report["error"] == "interrupted"
    assert slow.log.read_text().splitlines() == ["start S"]  # the call was stopped too


async def test_a_2026_round_sent_again_after_its_run_ended_gets_the_runs_result(
    tmp_path: Path,
) -> None:
    """A client that lost the answer to its round sends it again: the run has ended, and its
    stored result is the answer (the approved call ran once)."""
    log = tmp_path / "calls.log"
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with (
        http_server(_gated(tmp_path, log), "--store", store) as served,
        Client(served.url, mode="auto", elicitation_callback=Form()) as client,
    ):
        with anyio.fail_after(30):
            first = await client.session.call_tool(
                "assistant", {"prompt": "go"}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult), first
            [key] = first.input_requests or {}
            approved: dict[str, types.InputResponse] = {
                key: types.ElicitResult(action="accept", content={"approve": True})
            }
            once, again = [
                await client.session.call_tool(
                    "assistant",
                    {"prompt": "go"},
                    input_responses=approved,
                    request_state=first.request_state,
                    allow_input_required=True,
                )
                for _ in range(2)
            ]
    assert isinstance(once, types.CallToolResult)
    assert once.content == [types.TextContent(text="B is done")]
    assert isinstance(again, types.CallToolResult)
    assert again.content == once.content
    assert again.structured_content == once.structured_content
    assert log.read_text().splitlines() == ["start B", "end B"]
