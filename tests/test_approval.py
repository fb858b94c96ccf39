"""Calls that need a person's approval: which do (an agent's globs, an MCP server's globs and
its destructive tools), and how a run waits for the decision while the step's other calls
run, goes on when it comes, and tells the model of a denial."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Transport
from mcp_types import CallToolResult
from pydantic import JsonValue

from agent import AgentItem, AgentOptions, ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.approval import NO_APPROVER_GIVEN, ApprovalRequest, ApprovalRule, Decision
from gateway.approval_globs import UnmatchedApprovals
from gateway.assembly import open_gateway
from gateway.cli import main
from gateway.config import parse_config
from gateway.errors import ConfigError
from tests.prompt_model import PromptModel
from tests.servers.inprocess import Context, ToyServer, text_result
from tests.servers.real import filesystem_stdio
from toolkits import FunctionToolkit, Tool, function_tool
from toolkits.mcp import Backoff, McpServerConfig, McpToolkitGroup

pytestmark = pytest.mark.anyio


def calls(*pairs: tuple[str, str, dict[str, JsonValue]]) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=n, id=i, arguments=a) for n, i, a in pairs])


def told(model: ScriptedModel, call: int) -> dict[str, str]:
    """What the tools' results said to the model in its `call`-th request, by call id."""
    return {m.tool_call_id: m.content for m in model.calls[call][0] if isinstance(m, ToolMessage)}


class Person:
    """An approver that says what the test tells it to, when it tells it to."""

    def __init__(self) -> None:
        self.asked: dict[str, ApprovalRequest] = {}
        self._answers: dict[str, Decision] = {}
        self._answered: dict[str, anyio.Event] = {}
        self._asked_more = anyio.Event()

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked[request.call] = request
        self._asked_more.set()
        await self._answered.setdefault(request.call, anyio.Event()).wait()
        return self._answers[request.call]

    async def wait_until_asked(self, count: int) -> None:
        while len(self.asked) < count:
            await self._asked_more.wait()
            self._asked_more = anyio.Event()

    def say(self, call: str, decision: Decision) -> None:
        self._answers[call] = decision
        self._answered.setdefault(call, anyio.Event()).set()


@asynccontextmanager
async def running(
    gateway: Gateway, agent: str, person: Person, *, answer: str
) -> AsyncGenerator[None]:
    """`agent` runs beside the block (which plays the person); it must end with `answer`."""
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                result = await gateway.run(agent, "go", approver=person)
                assert result.output == answer

            tg.start_soon(run)
            yield


def _log_tool(log: list[str], noted: anyio.Event | None = None) -> FunctionToolkit:
    async def note(text: str) -> str:
        """Note a text."""
        log.append(text)
        if noted is not None:
            noted.set()
        return f"noted {text}"

    async def erase(text: str) -> str:
        """Erase a text."""
        log.append(f"erased {text}")
        return f"erased {text}"

    return FunctionToolkit("log", [function_tool(note), function_tool(erase)])


def _noop() -> str:
    """Does nothing."""
    return ""


def test_a_rule_covers_globs_and_destructive_tools() -> None:
    rule = ApprovalRule(["fs__write_*", "git__commit"])
    assert rule.covers("fs__write_file", {})
    assert rule.covers("git__commit", {"destructiveHint": False})
    assert not rule.covers("fs__read_file", {"destructiveHint": True})
    assert not rule.covers("FS__write_file", {})  # case counts
    destructive = ApprovalRule(destructive=True)
    assert destructive.covers("anything", {"destructiveHint": True})
    assert not destructive.covers("anything", {"destructiveHint": "yes"})
    assert not destructive.covers("anything", {})


def test_the_gateway_asks_by_agent_names_and_by_server_own_names() -> None:
    gateway = Gateway(
        [FunctionToolkit("fs", [_noop])],
        agents=[AgentSpec("a", ScriptedModel([]), approval=ApprovalRule(["fs__write_*"]))],
        approvals={"fs": ApprovalRule(["move_*"], destructive=True)},
    )
    spec = gateway.agents["a"]

    def tool(name: str, own: str, **annotations: Any) -> Tool:
        return Tool(name, "", {}, "fs", True, original_name=own, annotations=annotations)

    assert gateway.needs_approval(spec, tool("fs__write_file", "write_file"))
    assert gateway.needs_approval(spec, tool("fs__move_file", "move_file"))
    assert gateway.needs_approval(spec, tool("fs__edit", "edit", destructiveHint=True))
    assert not gateway.needs_approval(spec, tool("fs__read_file", "read_file"))
    other = Tool("fs__move_file", "", {}, "elsewhere", True, original_name="move_file")
    assert not gateway.needs_approval(spec, other)  # the server's rule is for its own tools
    # The server's rule alone, for any caller (an MCP client in proxy mode), named for it.
    assert gateway.node_rule(tool("fs__write_file", "write_file")) is None
    assert gateway.node_rule(tool("fs__move_file", "move_file")) == (
        "require_approval 'move_*' of server 'fs'"
    )
    assert gateway.node_rule(tool("fs__edit", "edit", destructiveHint=True)) == (
        "require_approval_if_destructive of server 'fs'"
    )
    assert gateway.node_rule(other) is None


def test_approvals_and_node_limits_for_no_node_or_no_call_are_refused() -> None:
    """A typo in the node's name would approve nothing, and a limit below 1 would let no call
    run: each is a `ConfigError` naming the key, not a gateway that ignores it."""
    nodes = [FunctionToolkit("slow", [_noop]), FunctionToolkit("calculator", [_noop])]
    with pytest.raises(
        ConfigError, match=r"^approvals: no node named 'slwo' \(nodes: slow, calculator\)$"
    ):
        Gateway(nodes, approvals={"slwo": ApprovalRule(["*"])})
    with pytest.raises(
        ConfigError, match=r"^node_limits: no node named 'slwo' \(nodes: slow, calculator\)$"
    ):
        Gateway(nodes, node_limits={"slwo": 1})
    for limit in (0, -1, True, 1.5):
        with pytest.raises(
            ConfigError, match=r"^node_limits: 'slow': .* is not a whole number >= 1$"
        ):
            Gateway(nodes, node_limits={"slow": limit})  # pyright: ignore[reportArgumentType]
    gateway = Gateway(nodes, node_limits={"slow": 2}, approvals={"slow": ApprovalRule(["*"])})
    assert gateway.node_limit("slow").capacity == 2
    assert "slow" in gateway.approvals


def test_a_glob_covers_a_tool_under_every_name_it_may_be_offered_as() -> None:
    """With `prefix="auto"` a tool is `crm__delete_user` while a clashing server is up and
    `delete_user` while it is down: a rule written for either name covers both."""
    qualified, bare = ApprovalRule(["crm__delete_*"]), ApprovalRule(["delete_*"])
    gateway = Gateway(
        [FunctionToolkit("crm", [_noop])],
        agents=[AgentSpec("q", ScriptedModel([]), approval=qualified)],
        approvals={"crm": ApprovalRule(["crm__delete_*"])},
    )
    gateway.agents["b"] = AgentSpec("b", ScriptedModel([]), approval=bare)
    offered_bare = Tool("delete_user", "", {}, "crm", True, original_name="delete_user")
    offered_long = Tool("crm__delete_user", "", {}, "crm", True, original_name="delete_user")
    for spec in gateway.agents.values():
        assert gateway.needs_approval(spec, offered_bare)
        assert gateway.needs_approval(spec, offered_long)
    gateway.approvals.clear()
    echo = Tool("echo", "", {}, "crm", True, original_name="echo")
    assert not gateway.needs_approval(gateway.agents["q"], echo)
    # Odd characters: the glob is written as `tools` shows the name with `prefix="always"`.
    dotted = Tool("delete.user", "", {}, "crm", True, original_name="delete.user")
    assert gateway.needs_approval(gateway.agents["q"], dotted)
    assert not ApprovalRule(["crm__delete_*"]).covers("delete_user", {})  # one name: as given


async def test_the_other_calls_run_while_two_wait_and_each_gets_one_result() -> None:
    log: list[str] = []
    model = ScriptedModel(
        [
            calls(
                ("note", "a", {"text": "A"}),
                ("erase", "b", {"text": "B"}),
                ("erase", "c", {"text": "C"}),
            ),
            "done",
        ]
    )
    spec = AgentSpec("a", model, tools=["log"], approval=ApprovalRule(["erase"]))
    noted = anyio.Event()
    gateway = Gateway([_log_tool(log, noted)], [spec])
    person = Person()
    async with running(gateway, "a", person, answer="done"):
        await person.wait_until_asked(2)
        await noted.wait()  # the call that needs no approval ran while they wait
        assert log == ["A"]
        assert sorted(person.asked) == ["tool 0 b", "tool 0 c"]
        assert person.asked["tool 0 b"].input == {"text": "B"}
        person.say("tool 0 c", Decision(approved=False, message="keep C"))
        person.say("tool 0 b", Decision(approved=True, message="only B"))
    assert log == ["A", "erased B"]
    assert told(model, 1) == {
        "a": "noted A",
        "b": "erased B\n\nThe user approved this call and said: only B",
        "c": "The user rejected the tool call to erase; it did not run. The user said: keep C",
    }


async def test_an_approval_three_agents_deep_is_asked_of_the_outermost_run() -> None:
    log: list[str] = []
    model = ScriptedModel(
        [
            calls(("middle", "m1", {"prompt": "ask the leaf"})),
            calls(("leaf", "l1", {"prompt": "erase W"})),
            calls(("erase", "w1", {"text": "W"})),
            "leaf: erased",
            "middle: the leaf erased",
            "lead: all done",
        ]
    )
    gateway = Gateway(
        [_log_tool(log)],
        [
            AgentSpec("lead", model, tools=["middle"]),
            AgentSpec("middle", model, tools=["leaf"]),
            AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"])),
        ],
    )
    person = Person()
    async with running(gateway, "lead", person, answer="lead: all done"):
        await person.wait_until_asked(1)
        [request] = person.asked.values()
        assert (request.call, request.short) == ("m1/l1/tool 0 w1", "m1/l1/w1")
        assert request.agents == ["lead", "middle", "leaf"]
        assert log == []
        person.say(request.call, Decision(approved=True))
    assert log == ["erased W"]
    assert len(model.calls) == 6  # every agent went on where it was: nothing asked twice


def _items_with_the_same_ids(log: list[str], batch_size: int) -> tuple[Gateway, PromptModel]:
    """Items `q0` and `q1` each call agent `leaf` as `call_leaf`, whose gated `erase` call is
    `call_d` in both (as models that number calls per conversation say): only the text
    erased differs."""
    model = PromptModel(
        {
            **{
                f"q{n}": [
                    calls(("leaf", "call_leaf", {"prompt": f"erase {n}"})),
                    f"top {n}: done",
                ]
                for n in (0, 1)
            },
            **{
                f"erase {n}": [calls(("erase", "call_d", {"text": f"T{n}"})), f"leaf {n}: done"]
                for n in (0, 1)
            },
        }
    )
    return Gateway(
        [_log_tool(log)],
        [
            AgentSpec("top", model, tools=["leaf"], options=AgentOptions(batch_size=batch_size)),
            AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"])),
        ],
    ), model


@pytest.mark.parametrize("batch_size", [1, 2])
async def test_two_items_sub_agent_calls_with_the_same_ids_are_two_questions(
    batch_size: int,
) -> None:
    """Each item's gated call inside a sub-agent has its own name (its item's tool call key,
    `1:call_leaf`, as the run's journal names it) and its own item, and runs only on its own
    decision: item 1's, asked with item 0's (a batch of 2) or after it ended (of 1)."""
    log: list[str] = []
    gateway, model = _items_with_the_same_ids(log, batch_size)
    person = Person()
    items = [AgentItem(prompt="q0"), AgentItem(prompt="q1")]
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                result = await gateway.run("top", items, approver=person)
                assert [item.output for item in result.items] == ["top 0: done", "top 1: done"]

            tg.start_soon(run)
            await person.wait_until_asked(batch_size)
            person.say("call_leaf/tool 0 call_d", Decision(approved=True))
            await person.wait_until_asked(2)
            asked = {call: (r.short, r.item, r.input, r.agents) for call, r in person.asked.items()}
            assert asked == {
                "call_leaf/tool 0 call_d": ("call_leaf/call_d", 0, {"text": "T0"}, ["top", "leaf"]),
                "1:call_leaf/tool 0 call_d": (
                    "1:call_leaf/call_d",
                    1,
                    {"text": "T1"},
                    ["top", "leaf"],
                ),
            }
            person.say("1:call_leaf/tool 0 call_d", Decision(approved=False, message="not T1"))
    assert log == ["erased T0"]  # item 1's call did not run on item 0's approval
    [told] = [m for q, m in model.calls if q == "erase 1" and len(m) > 2]
    [said] = [m.content for m in told if isinstance(m, ToolMessage)]
    assert said == "The user rejected the tool call to erase; it did not run. The user said: not T1"


async def test_without_anyone_to_ask_the_call_is_refused_and_the_run_goes_on() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("erase", "e1", {"text": "E"})), "I could not"])
    spec = AgentSpec("a", model, tools=["log"], approval=ApprovalRule(["erase"]))
    events: list[TraceEvent] = []

    async def hear(event: TraceEvent) -> None:
        events.append(event)

    result = await Gateway([_log_tool(log)], [spec]).run("a", "go", hooks=[hear])
    assert result.output == "I could not"
    assert log == []
    # In Python there are no commands' flags: the remedy is an approver.
    assert told(model, 1)["e1"] == f"Error: {NO_APPROVER_GIVEN}"
    assert "approver=" in NO_APPROVER_GIVEN
    assert "--no-store" not in NO_APPROVER_GIVEN
    # The trace (--trace, a JSON trace's reader) says why the call did not run.
    notes = [(e.kind, e.name, e.output) for e in events if e.phase == "note"]
    assert notes == [("tool", "erase", {"approval": "refused", "call": "tool 0 e1"})]


async def test_a_gateway_built_in_code_applies_its_servers_own_approval_keys() -> None:
    """The README's library path, `Gateway([*group.nodes, ...])`: a server's own
    `require_approval` gates its tools as `open_gateway`'s do (once it gated nothing there),
    and what `approvals=` says of the server adds to it."""
    ran: list[str] = []
    crm = ToyServer()

    def tool(name: str) -> None:
        async def handler(_ctx: Context, _args: dict[str, Any]) -> CallToolResult:
            ran.append(name)
            return text_result(f"{name} done")

        crm.add(name, handler)

    for name in ("delete_user", "export", "lookup"):
        tool(name)
    configs = {"crm": McpServerConfig(command="in-process", require_approval=["delete_*"])}
    model = ScriptedModel(
        [
            calls(
                ("crm__delete_user", "d", {}), ("crm__export", "e", {}), ("crm__lookup", "l", {})
            ),
            "done",
        ]
    )
    async with McpToolkitGroup(configs, targets={"crm": crm.server}) as group:
        gateway = Gateway(
            group.nodes,
            [AgentSpec("a", model, tools=["crm"])],
            approvals={"crm": ApprovalRule(["export"])},
        )
        with anyio.fail_after(20):
            result = await gateway.run("a", "go")
            listed = {t.name: t for t in await group["crm"].list_tools()}
    assert result.output == "done"
    assert ran == ["lookup"]
    refused = f"Error: {NO_APPROVER_GIVEN}"
    assert told(model, 1) == {"d": refused, "e": refused, "l": "lookup done"}
    assert gateway.node_rule(listed["crm__delete_user"]) == (
        "require_approval 'delete_*' of server 'crm'"
    )
    assert gateway.node_rule(listed["crm__export"]) == "require_approval 'export' of server 'crm'"


@pytest.mark.integration
async def test_a_servers_destructive_tools_and_globs_need_approval(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("kept")
    server = filesystem_stdio(
        tmp_path, require_approval=["list_*"], require_approval_if_destructive=True
    )
    config = parse_config(
        {
            "mcpServers": {"fs": server.model_dump(exclude_defaults=True)},
            "agents": {"a": {"tools": ["fs"]}},
        }
    )
    target = str(tmp_path / "notes.txt")
    model = ScriptedModel(
        [
            calls(
                ("fs__write_file", "w", {"path": target, "content": "gone"}),  # destructive
                ("fs__list_directory", "l", {"path": str(tmp_path)}),  # the server's glob
                ("fs__read_text_file", "r", {"path": target}),
            ),
            "done",
        ]
    )
    person = Person()
    async with open_gateway(config) as gateway:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: gateway.run("a", "go", model=model, approver=person))
                await person.wait_until_asked(2)
                assert sorted(r.tool for r in person.asked.values()) == [
                    "fs__list_directory",
                    "fs__write_file",
                ]
                for call in person.asked:
                    person.say(call, Decision(approved=False))
    results: Mapping[str, str] = told(model, 1)
    assert json.loads(results["r"])["content"] == "kept"  # read before any write
    assert results["w"].startswith("The user rejected the tool call to fs__write_file")
    assert (tmp_path / "notes.txt").read_text() == "kept"


@pytest.mark.integration
def test_tools_lists_which_calls_need_approval_and_which_rule_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once neither `tools` nor `tools --json` said it: a rule was checked only by a run."""
    server = filesystem_stdio(
        tmp_path, require_approval=["move_*"], include=["move_file", "write_file", "read_*"]
    )
    config = tmp_path / "c.json"
    agents = {
        "ops": {"tools": ["fs"], "require_approval": ["fs__read_text*"]},
        "cautious": {"tools": ["fs"], "require_approval_if_destructive": True},
    }
    servers = {"fs": server.model_dump(exclude_defaults=True)}
    config.write_text(json.dumps({"mcpServers": servers, "agents": agents}))
    moving = "require_approval 'move_*' of server 'fs'"  # whoever calls it
    assert main(["tools", "--config", str(config), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    rules = {tool["name"]: tool["approval"] for tool in listing["tools"]}
    assert rules["fs__move_file"] == moving
    assert rules["fs__write_file"] is None  # its server's rule does not cover it
    gated = {agent["name"]: agent["approval"] for agent in listing["agents"]}
    assert gated == {
        "ops": {
            "fs__move_file": moving,
            "fs__read_text_file": "require_approval 'fs__read_text*' of agent 'ops'",
        },
        "cautious": {  # write_file and move_file are marked destructiveHint
            "fs__move_file": "require_approval_if_destructive of agent 'cautious'",
            "fs__write_file": "require_approval_if_destructive of agent 'cautious'",
        },
    }
    assert main(["tools", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    moved = next(i for i, line in enumerate(lines) if line.startswith("fs__move_file "))
    assert lines[moved + 1] == f"  needs approval: {moving}"
    ops = lines.index(next(line for line in lines if line.startswith("agent ops:")))
    assert lines[ops + 1 : ops + 3] == [
        f"  fs__move_file needs approval: {moving}",
        "  fs__read_text_file needs approval: require_approval 'fs__read_text*' of agent 'ops'",
    ]


async def test_an_agents_rule_holds_while_a_clashing_auto_server_is_down() -> None:
    """The tester's case: `crm` and `crm_eu` both `prefix="auto"`, `crm_eu` down, so the
    tool is offered bare as `delete_user`; the rule `crm__delete_*` still asks a person."""
    log: list[str] = []
    crm = ToyServer()

    async def delete_user(_ctx: Context, args: dict[str, Any]) -> CallToolResult:
        log.append(f"deleted {args['user_id']}")
        return text_result("deleted")

    crm.add("delete_user", delete_user)

    def down() -> Transport:
        raise OSError("connection refused by test")

    configs = {
        name: McpServerConfig(command="in-process", prefix="auto") for name in ("crm", "crm_eu")
    }
    model = ScriptedModel([calls(("delete_user", "d1", {"user_id": "u_1"})), "done"])
    spec = AgentSpec(
        "ops", model, tools=["crm", "crm_eu"], approval=ApprovalRule(["crm__delete_*"])
    )
    group = McpToolkitGroup(
        configs, targets={"crm": crm.server, "crm_eu": down}, backoff=Backoff(60)
    )
    async with group:
        assert [t.name for t in await group["crm"].list_tools()] == ["delete_user"]
        person = Person()
        gateway = Gateway(group.nodes, [spec])
        ended = anyio.Event()

        async def run() -> None:
            await gateway.run("ops", "delete user u_1", approver=person)
            ended.set()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                async with anyio.create_task_group() as first:  # asked, or ended unasked

                    async def asked() -> None:
                        await person.wait_until_asked(1)
                        first.cancel_scope.cancel()

                    async def ended_first() -> None:
                        await ended.wait()
                        first.cancel_scope.cancel()

                    first.start_soon(asked)
                    first.start_soon(ended_first)
                assert log == []  # nothing ran before the decision
                [request] = person.asked.values()
                assert request.tool == "delete_user"
                person.say(request.call, Decision(approved=False))
    assert log == []
    assert told(model, 1)["d1"].startswith("The user rejected the tool call to delete_user")


PIPED = Path(__file__).parent / "servers" / "piped.py"


async def test_approval_globs_that_match_no_tool_are_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The tester's typos: on the server `delet_*`, on the agent `s00_crm__delet_*` and
    `s00_crm__delete_usr`; each would leave the tool ungated, so each is warned of."""
    config = parse_config(
        {
            "mcpServers": {
                "s00_crm": {
                    "command": sys.executable,
                    "args": [str(PIPED)],
                    "include": ["echo", "fail"],
                    "require_approval": ["ech*", "fial"],
                }
            },
            "agents": {
                "ops": {"tools": ["s00_crm"], "require_approval": ["s00_crm__ehco", "fail"]},
                "fine": {"tools": ["s00_crm"], "require_approval": ["s00_crm__*", "echo"]},
            },
        }
    )
    async with open_gateway(config) as gateway:
        await gateway.nodes["s00_crm"].list_tools()
        assert await gateway.tools_for(gateway.agents["ops"])
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [
        "require_approval 'fial': matches no tool of the server (did you mean 'fail'?), "
        "so no call is gated by it",
        "agent 'ops': require_approval 's00_crm__ehco': matches no tool of the agent (did you "
        "mean 's00_crm__echo'?), so no call is gated by it",
    ]


class Warned(logging.Handler):
    """The warnings of one logger, as they come; `until(n)` waits for the n-th."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: list[str] = []
        self._more = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())
        self._more.set()

    async def until(self, count: int) -> None:
        with anyio.fail_after(30):  # a server's start, a tool list's change
            while len(self.said) < count:
                self._more = anyio.Event()
                await self._more.wait()


LATE = (
    "import runpy, sys; open(sys.argv[1]).close(); "  # blocks until the test opens the FIFO
    "runpy.run_path(sys.argv[2], run_name='__main__')"
)


@pytest.mark.integration
async def test_approval_globs_are_checked_again_as_a_late_server_lists_its_tools(
    tmp_path: Path,
) -> None:
    """As under `serve`: the gateway is up while server `late` still starts, and `broken`
    fails to start. Nothing is said of an agent using `late` until it lists its tools; then
    each agent's misspelt globs are warned of (an agent's own name matches, `broken` is said
    to be left out), and again when `late`'s tools change, only where what matches changed."""
    fifo = tmp_path / "start"
    os.mkfifo(fifo)
    config = parse_config(
        {
            "mcpServers": {
                "late": {
                    "command": sys.executable,
                    "args": ["-c", LATE, str(fifo), str(PIPED)],
                    "prefix": "always",
                },
                "broken": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]},
            },
            "agents": {
                "helper": {},
                "ops": {
                    "tools": ["helper", "late", "broken"],
                    "require_approval": ["helper", "helpr", "late__ehco"],
                },
                "watch": {"tools": ["late"], "require_approval": ["late__grown", "late__ehco"]},
            },
        }
    )
    warned = Warned()
    logger = logging.getLogger("gateway.approval_globs")
    logger.addHandler(warned)
    try:
        async with open_gateway(config, wait_for=["broken"]) as gateway:
            assert warned.said == []  # `late`'s tools are not known yet
            await anyio.to_thread.run_sync(lambda: fifo.open("w").close())  # late may start
            await warned.until(2)
            assert warned.said == [
                "agent 'ops': require_approval 'helpr', 'late__ehco': match no tool of the "
                "agent (did you mean 'helper' for 'helpr', 'late__echo' for 'late__ehco'?), "
                "so no call is gated by them (servers without tools now, not counted: broken)",
                "agent 'watch': require_approval 'late__grown', 'late__ehco': match no tool of "
                "the agent (did you mean 'late__grow' for 'late__grown', 'late__echo' for "
                "'late__ehco'?), so no call is gated by them",
            ]
            await gateway.nodes["late"].call_tool("late__grow", {})  # adds `grown`
            await warned.until(3)
    finally:
        logger.removeHandler(warned)
    # `watch`'s `late__grown` matches now; `ops`'s globs are as unmatched as they were.
    assert warned.said[2:] == [
        "agent 'watch': require_approval 'late__ehco': matches no tool of the agent (did you "
        "mean 'late__echo'?), so no call is gated by it"
    ]


async def test_a_server_trying_again_after_failing_is_left_out_not_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`flaky` failed to start and is trying again: unlike a server making its first
    connection, it has no tools to wait for, so the agent's misspelt glob is warned of now,
    saying `flaky` was left out."""
    crm = ToyServer()
    crm.add_echo("delete_user")
    attempts = 0

    @asynccontextmanager
    async def hangs() -> AsyncGenerator[Any]:
        await anyio.sleep_forever()
        yield  # pragma: no cover

    def flaky() -> Transport:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise OSError("connection refused by test")
        return hangs()

    configs = {name: McpServerConfig(command="in-process") for name in ("crm", "flaky")}
    spec = AgentSpec(
        "ops", ScriptedModel([]), tools=["crm", "flaky"], approval=ApprovalRule(["crm__delet"])
    )
    group = McpToolkitGroup(
        configs, targets={"crm": crm.server, "flaky": flaky}, backoff=Backoff(initial=0.01)
    )
    with anyio.fail_after(20):
        async with group:
            await group["flaky"].wait_for_health(lambda health: health.retrying)
            UnmatchedApprovals(Gateway(group.nodes, [spec])).check()
    said = [r.getMessage() for r in caplog.records if r.name == "gateway.approval_globs"]
    assert said == [
        "agent 'ops': require_approval 'crm__delet': matches no tool of the agent (did you "
        "mean 'crm__delete_user'?), so no call is gated by it (servers without tools now, not "
        "counted: flaky)"
    ]
