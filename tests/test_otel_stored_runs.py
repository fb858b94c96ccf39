"""A stored run's OpenTelemetry trace. A served agent's stored run stopped with the call that
follows it (its client cancelled, or the server ended the call as it stops): the run's spans
end within the SDK's span of the `tools/call`, which ends once the call is answered. A run no
caller's trace reaches has its agent's span as a true root, and each process (or gateway)
that resumes it continues under that span, sampled as it was."""

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
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased

from agent import AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRule, Decision
from gateway.durable import open_runs
from gateway.errors import GatewayError
from gateway.otel import OtelExporter
from gateway.run_state import RunResult, RunState
from gateway.trace import new_id
from tests.server.processes import Served, http_server
from tests.test_otel import exported_spans
from toolkits import FunctionToolkit, calculator

pytestmark = pytest.mark.anyio

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


@pytest.mark.integration
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


@pytest.mark.integration
@pytest.mark.timeout(180)  # three commands, each importing DBOS
@pytest.mark.parametrize("sampled", [True, False])
def test_a_cli_run_resumed_in_another_process_continues_its_trace(
    tmp_path: Path, sampled: bool
) -> None:
    """`run --otel --no-wait` stops at a call waiting for approval; denied, `resume --otel`
    finishes the run in a second process: every span of both is in one trace, whose root is
    the first process's `invoke_agent`, the second's `invoke_agent` under it. Was: both under
    a made-up parent span id that no span has (a trace with its root missing). Sampled out
    by the first process's sampler (`OTEL_TRACES_SAMPLER`), the run is not traced by the
    second either, though its sampler would trace a root (was: every run traced)."""
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

    def cli(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(executable), *args, *store],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**env, **more},
        )

    # The first process's sampler keeps no trace (0 of them); the second's, the default,
    # keeps a root and follows a parent's decision.
    ratio = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}
    first = cli("run", "6 * 7?", "--otel", "--no-wait", "--json", **({} if sampled else ratio))
    assert first.returncode == 3, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    assert cli("runs", "deny", run_id, "c").returncode == 0
    resumed = cli("resume", run_id, "--otel", "--json", "--model", "scripted:then.json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["output"] == "not allowed"
    before, after = exported_spans(first.stderr), exported_spans(resumed.stderr)
    if not sampled:
        assert (before, after) == ({}, {})
        return
    assert "await_approval calculator" in after  # the decision, in the second process
    traces = {span["context"]["trace_id"] for span in [*before.values(), *after.values()]}
    assert len(traces) == 1, traces
    root, resumed_agent = before["invoke_agent assistant"], after["invoke_agent assistant"]
    assert root["parent_id"] is None
    assert resumed_agent["parent_id"] == root["context"]["span_id"]


def _ask(call_id: str) -> ScriptedAnswer:
    """The model's answer asking for the calculator, which waits for approval."""
    call = ScriptedCall(name="calculator", id=call_id, arguments={"expression": "6 * 7"})
    return ScriptedAnswer(tool_calls=[call])


def _gateway(
    answer: str | ScriptedAnswer | ScriptedModel,
    sampler: Sampler | None = None,
    *,
    traced: bool = True,
) -> tuple[Gateway, InMemorySpanExporter]:
    """A gateway whose calculator waits for approval, exporting to memory unless not
    `traced`: a process of its own, as far as the trace goes (its tracer provider,
    `sampler`'s, else the default's)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    model = answer if isinstance(answer, ScriptedModel) else ScriptedModel([answer])
    spec = AgentSpec("assistant", model, ["calculator"], approval=ApprovalRule(["calculator"]))
    toolkit = FunctionToolkit("calculator", [calculator])
    hooks = [OtelExporter(provider)] if traced else []
    return Gateway([toolkit], [spec], hooks=hooks), memory


async def _stopped_then_resumed(tmp_path: Path, *gateways: Gateway) -> None:
    """A stored run started on the first of `gateways`, on each but the last stopped as its
    call waits for approval (its process gone) and denied, then resumed on the next."""
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        state = RunState(run_id=new_id(), agent="assistant", items=[AgentItem(prompt="go")])
        with anyio.fail_after(30):
            for index, gateway in enumerate(gateways[:-1]):
                runs.use(gateway)
                await (runs.adopt(state.run_id) if index else runs.begin(state))
                waiting = await runs.follow(state.run_id)
                assert isinstance(waiting, list)  # its call waits for approval
                runs.interrupt(state.run_id)
                with pytest.raises(GatewayError, match="interrupted"):
                    await runs.follow(state.run_id, pause=False)
                await runs.decide(state.run_id, waiting[0].call, Decision(approved=False))
            runs.use(gateways[-1])
            await runs.adopt(state.run_id)
            result = await runs.follow(state.run_id)
    assert isinstance(result, RunResult)
    assert result.items[0].output == "not allowed"


def _agent(memory: InMemorySpanExporter) -> ReadableSpan:
    [agent] = [s for s in memory.get_finished_spans() if s.name == "invoke_agent assistant"]
    return agent


async def test_a_resumed_run_continues_under_its_first_agent_span_a_true_root(
    tmp_path: Path,
) -> None:
    # The model's answers so far are recorded with the run: resumed, it asks for the next.
    (first, before), (then, after) = _gateway(_ask("c")), _gateway("not allowed")
    await _stopped_then_resumed(tmp_path, first, then)
    root, resumed = _agent(before), _agent(after)
    assert root.parent is None  # no made-up parent that no span has
    assert root.context is not None
    assert resumed.parent is not None
    assert resumed.parent.trace_id == root.context.trace_id
    assert resumed.parent.span_id == root.context.span_id
    assert resumed.parent.trace_flags.sampled
    # Every span of the second gateway is in the first one's trace.
    assert {s.context.trace_id for s in after.get_finished_spans() if s.context} == {
        root.context.trace_id
    }


async def test_a_run_its_first_process_sampled_out_is_not_traced_when_resumed(
    tmp_path: Path,
) -> None:
    """The first process's sampler (ratio 0) decides for the whole run: the resumed one,
    sampling as its parent says (the default), exports nothing either."""
    first, before = _gateway(_ask("c"), ParentBased(TraceIdRatioBased(0)))
    then, after = _gateway("not allowed")
    await _stopped_then_resumed(tmp_path, first, then)
    assert before.get_finished_spans() == ()
    assert after.get_finished_spans() == ()


async def test_a_run_its_first_process_did_not_trace_is_rooted_by_the_first_that_does(
    tmp_path: Path,
) -> None:
    """OTel off where it started: the first process that traces it makes its root, and the
    next one continues under that."""
    first, _ = _gateway(_ask("c1"), traced=False)
    (then, middle), (last, after) = _gateway(_ask("c2")), _gateway("not allowed")
    await _stopped_then_resumed(tmp_path, first, then, last)
    root, resumed = _agent(middle), _agent(after)
    assert root.parent is None
    assert root.context is not None
    assert resumed.parent is not None
    assert (resumed.parent.trace_id, resumed.parent.span_id) == (
        root.context.trace_id,
        root.context.span_id,
    )


class Unanswered(ScriptedModel):
    """A model asked once, that never answers: its run stops before any checkpoint of a
    step."""

    def __init__(self) -> None:
        super().__init__([])
        self.asked = anyio.Event()

    async def invoke(self, messages, tools, *, on_token=None):  # type: ignore[override]
        self.asked.set()
        await anyio.sleep_forever()


async def test_a_run_stopped_while_its_model_is_first_asked_resumes_under_its_root(
    tmp_path: Path,
) -> None:
    """The root's context is saved as the span opens, not with the run's first step."""
    model = Unanswered()
    (first, before), (then, after) = _gateway(model), _gateway("not allowed")
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        state = RunState(run_id=new_id(), agent="assistant", items=[AgentItem(prompt="go")])
        with anyio.fail_after(30):
            runs.use(first)
            await runs.begin(state)
            await model.asked.wait()
            runs.interrupt(state.run_id)
            with pytest.raises(GatewayError, match="interrupted"):
                await runs.follow(state.run_id, pause=False)
            runs.use(then)
            await runs.adopt(state.run_id)
            result = await runs.follow(state.run_id)
    assert isinstance(result, RunResult)
    assert result.items[0].output == "not allowed"
    root, resumed = _agent(before), _agent(after)
    assert root.parent is None
    assert root.context is not None
    assert resumed.parent is not None
    assert resumed.parent.span_id == root.context.span_id
