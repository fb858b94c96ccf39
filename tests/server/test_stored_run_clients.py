"""A served agent's stored run goes on whatever its client does: a decision from the store
(`runs approve`, `approve_run` from another session) counts while the client is shown the
approval form, which is then withdrawn, and a client that is killed meanwhile holds nothing
up. Real `serve --http --store` processes, real SDK clients over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import Client
from mcp.client.session import ClientRequestContext

from tests.durable.cli_runs import cli, cli_env, list_runs

from .processes import REPO, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
)


def _config(directory: Path, answers: list[dict[str, Any]]) -> Path:
    script = directory / "answers.json"
    script.write_text(json.dumps(answers))
    config = directory / "agent-gateway.toml"
    config.write_text(
        TOOLS + f'[agents.assistant]\nmodel = "scripted:{script}"\n'
        'tools = ["logged", "guarded"]\nrequire_approval = ["guarded"]\n'
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
