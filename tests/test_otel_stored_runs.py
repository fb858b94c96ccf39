"""A served agent's stored run stopped with the call that follows it (its client cancelled, or
the server ended the call as it stops): the run's spans end within the SDK's span of the
`tools/call`, which ends once the call is answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


@pytest.mark.timeout(180)  # three commands, each importing DBOS
def test_a_cli_run_resumed_in_another_process_continues_its_trace(tmp_path: Path) -> None:
    """`run --otel --no-wait` stops at a call waiting for approval; denied, `resume --otel`
    finishes the run in a second process: every span of both is in one trace, each process's
    `invoke_agent` under the same parent (the trace context kept with the run). Was: a new
    trace for the resumed process."""
    executable = Path(sys.executable).parent / "agent-gateway"
    call = {"name": "calculator", "id": "c", "arguments": {"expression": "6 * 7"}}
    (tmp_path / "answers.json").write_text(json.dumps([{"tool_calls": [call]}]))
    # A scripted model starts its script over in each process: the resumed one's is its own.
    (tmp_path / "then.json").write_text(json.dumps([{"content": "not allowed"}]))
    (tmp_path / "agent-gateway.toml").write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n[agents.assistant]\n'
        'model = "scripted:answers.json"\ntools = ["calculator"]\n'
        'require_approval = ["calculator"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    store = ["--state-dir", str(tmp_path / "state")]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(executable), *args, *store],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )

    first = cli("run", "6 * 7?", "--otel", "--no-wait", "--json")
    assert first.returncode == 3, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    assert cli("runs", "deny", run_id, "c").returncode == 0
    resumed = cli("resume", run_id, "--otel", "--json", "--model", "scripted:then.json")
    assert resumed.returncode == 0, resumed.stderr
    before, after = exported_spans(first.stderr), exported_spans(resumed.stderr)
    assert "await_approval calculator" in after  # the decision, in the second process
    traces = {span["context"]["trace_id"] for span in [*before.values(), *after.values()]}
    assert len(traces) == 1, traces
    agents = before["invoke_agent assistant"], after["invoke_agent assistant"]
    assert agents[0]["parent_id"] is not None
    assert agents[0]["parent_id"] == agents[1]["parent_id"]
