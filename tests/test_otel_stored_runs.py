"""A served agent's stored run stopped with the call that follows it (its client cancelled, or
the server ended the call as it stops): the run's spans end within the SDK's span of the
`tools/call`, which ends once the call is answered."""

from __future__ import annotations

import json
import os
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from mcp import Client

from tests.server.processes import Served, http_server
from tests.test_otel import exported_spans

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SPANS = ("tools/call slow", "invoke_agent slow", "execute_tool wait_until_cancelled")
"""Each the parent of the next."""


def _config(tmp_path: Path) -> Path:
    script = tmp_path / "answers.json"
    tool = {"name": "wait_until_cancelled", "arguments": {"marker": str(tmp_path / "marker")}}
    script.write_text(json.dumps([{"tool_calls": [tool]}, {"content": "never"}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        "[gateway]\notel = true\n"
        '[tools.wait_until_cancelled]\npython = "tests.sample_tools:wait_until_cancelled"\n'
        f'[agents.slow]\nmodel = "scripted:{script}"\ntools = ["wait_until_cancelled"]\n'
    )
    return config


async def _spans(served: Served) -> dict[str, Any]:
    while True:  # until they are out (exported in batches, every 50 ms)
        more = served.more_stderr
        spans = exported_spans("\n".join(served.stderr))
        if all(name in spans for name in SPANS):
            return spans
        assert not served.stderr_closed.is_set(), served.stderr
        await more.wait()


def _ended(span: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(span["end_time"])


@pytest.mark.parametrize("stopped_by", ["client", "server"])
async def test_a_stopped_runs_spans_end_within_the_call_that_followed_it(
    tmp_path: Path, stopped_by: Literal["client", "server"]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    said: list[str] = []
    with anyio.fail_after(60):
        async with (
            http_server(
                _config(tmp_path),
                "--state-dir",
                str(tmp_path / "runs"),
                env={**env, "OTEL_BSP_SCHEDULE_DELAY": "50"},
            ) as served,
            Client(served.url, mode="legacy") as client,  # cancels with notifications/cancelled
        ):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    result = await client.call_tool("slow", {"prompt": "wait"})
                    said.extend(getattr(c, "text", "") for c in result.content)

                tg.start_soon(call)
                await served.line_starting("wait_until_cancelled: started")
                if stopped_by == "client":
                    tg.cancel_scope.cancel()
                else:
                    served.process.terminate()  # the call gets the grace, then is ended
            spans = await _spans(served)
    if stopped_by == "server":
        assert "the call to 'slow' was stopped" in " ".join(said)
    for parent, child in pairwise(SPANS):
        assert spans[child]["parent_id"] == spans[parent]["context"]["span_id"]
        assert spans[child]["status"]["description"] == "cancelled"
        assert _ended(spans[child]) <= _ended(spans[parent]), (child, parent)
