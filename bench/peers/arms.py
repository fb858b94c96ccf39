"""The arms: what the driver talks to, and how each one is started.

Every arm but `direct-stdio` is reached by the same driver over streamable HTTP on 127.0.0.1.
A proxy arm sits in front of a downstream given as a `Backend`: the round's downstream process
over HTTP, or a stdio command the proxy spawns. The same builders make the 50-server fronts
and the nested hop (a proxy whose backend is another proxy of its kind).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import psutil
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench._processes import READY, REPO, Running, free_port, running
from bench.downstream import READY as DOWNSTREAM_READY

from .sizes import Sizes
from .venvs import peer_bin

__all__ = [
    "ARMS",
    "DIRECT",
    "Arm",
    "Backend",
    "Env",
    "Front",
    "Stack",
    "downstream",
    "front",
    "gateway_config",
    "http_backend",
    "open_stack",
]

PYTHON = sys.executable
GATEWAY = str(Path(sys.executable).parent / "agent-gateway")
DOWNSTREAM = str(REPO / "bench" / "downstream.py")
FASTMCP_PROXY = str(REPO / "bench" / "peers" / "fastmcp_proxy.py")
FLOORS = str(REPO / "bench" / "peers" / "floors.py")
DIRECT = "direct"
PEER_READY = "bench-peer: serving on "
"""What `fastmcp_proxy.py` prints once it listens (it runs in another venv: no import)."""
FLOOR_READY = "bench-floor: serving on "
"""What `floors.py` prints once it listens (a script: not imported here)."""
ECHO_BYTES = 200

Kind = Literal[
    "direct", "agent-gateway", "mcp-proxy", "fastmcp", "fastmcp-fresh", "floor-relay", "floor-bare"
]


@dataclass(frozen=True)
class Arm:
    name: str
    kind: Kind
    stdio: bool
    """The downstream is a stdio process (spawned by the proxy, or by the driver for direct)."""
    peer: str | None = None
    """The venv it needs (`venvs.PEERS`), if not ours."""
    description: str = ""
    env: tuple[tuple[str, str], ...] = ()
    """Extra environment of the front process."""
    protocol: str = ""
    """Ours: the `protocol` of the nodes to HTTP downstreams (the config's default if empty)."""
    default: bool = True
    """Run unless `--arms` names others; off for variants of ours that a change is weighed by."""

    @property
    def ours(self) -> bool:
        return self.kind == "agent-gateway"


def twin(arm: Arm, checkout: Path) -> Arm:
    """`arm` on the code of another checkout of this repository (`--checkout`), the same in
    every other setting (its downstream, protocol, environment)."""
    where = checkout.resolve()
    downstream = "stdio" if arm.stdio else "HTTP"
    return replace(
        arm,
        name=f"{arm.name}@{where.name}",
        description=f"{downstream} downstream, the code in {checkout}",
        env=(*arm.env, ("PYTHONPATH", str(where))),
    )


ARMS = (
    Arm(DIRECT, "direct", stdio=False, description="the driver calls the downstream over HTTP"),
    Arm("direct-stdio", "direct", stdio=True, description="the driver spawns it over stdio"),
    Arm("agent-gateway", "agent-gateway", stdio=False, description="HTTP downstream"),
    Arm(
        "agent-gateway-modern",
        "agent-gateway",
        stdio=False,
        description="HTTP downstream, reached at 2026-07-28 as direct's driver does",
        protocol="modern",
    ),
    Arm("agent-gateway-stdio", "agent-gateway", stdio=True, description="stdio downstream"),
    Arm(
        "agent-gateway-asyncio",
        "agent-gateway",
        stdio=False,
        description="HTTP downstream, asyncio's own event loop instead of uvloop",
        env=(("AGENT_GATEWAY_EVENT_LOOP", "asyncio"),),
        default=False,
    ),
    Arm("mcp-proxy", "mcp-proxy", stdio=True, peer="mcp-proxy", description="0.13, stdio"),
    Arm("fastmcp", "fastmcp", stdio=False, peer="fastmcp", description="reused session, HTTP"),
    Arm("fastmcp-fresh", "fastmcp-fresh", stdio=False, peer="fastmcp", description="default"),
    Arm(
        "floor-relay",
        "floor-relay",
        stdio=False,
        description="reference: bytes relayed, no HTTP parsed (`floors.py`)",
    ),
    Arm(
        "floor-bare",
        "floor-bare",
        stdio=False,
        description="reference: uvicorn + a bare forwarding app (`floors.py`)",
    ),
)


@dataclass(frozen=True)
class Env:
    sizes: Sizes
    workdir: Path
    downstream: str = ""
    """The round's downstream process: base URL (`/mcp`, `/wide/mcp`, `/s{i}/mcp` below it)."""
    downstream_pid: int = 0


@dataclass(frozen=True)
class Backend:
    """One downstream of a proxy: a URL, or a stdio command."""

    url: str = ""
    command: tuple[str, ...] = ()
    protocol: str = ""
    """Ours: how the node speaks to a URL (`protocol` in its config), if not the default."""

    @staticmethod
    def stdio(*args: str) -> Backend:
        return Backend(command=(PYTHON, DOWNSTREAM, "--stdio", *args))


@dataclass
class Front:
    """A running front: the URL the driver connects to and the process to measure."""

    url: str
    pid: int


@dataclass
class Stack:
    """An arm ready for the workloads: a connected client, the tools' exposed names."""

    arm: Arm
    client: Client
    pid: int
    url: str | None
    """For more clients; None for stdio (each client would spawn its own server)."""
    tools: dict[str, str] = field(default_factory=dict[str, str])


def exposed(names: Sequence[str], base: str) -> str:
    """The name a front gives the downstream's tool `base` (`echo`, `d__echo`, `s0_echo`...)."""
    if base in names:
        return base
    matches = [n for n in names if n.endswith(f"_{base}")]
    if len(matches) != 1:
        raise RuntimeError(f"no single tool named like {base!r} among {list(names)[:10]}...")
    return matches[0]


async def tool_names(client: Client) -> dict[str, str]:
    names = [tool.name for tool in (await client.list_tools()).tools]
    return {base: exposed(names, base) for base in ("echo", "blob", "sleep")}


@asynccontextmanager
async def downstream(servers: int, wide: int) -> AsyncGenerator[Running]:
    command = [PYTHON, DOWNSTREAM, "--http", "--servers", str(servers), "--wide", str(wide)]
    async with running(command, ready=DOWNSTREAM_READY) as process:
        yield process


def _toml_backend(name: str, backend: Backend) -> str:
    if backend.url:
        protocol = f"protocol = {json.dumps(backend.protocol)}\n" if backend.protocol else ""
        return f"[mcpServers.{name}]\nurl = {json.dumps(backend.url)}\n{protocol}"
    command, *args = backend.command
    return f"[mcpServers.{name}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"


def gateway_config(
    path: Path,
    backends: dict[str, Backend],
    *,
    expose: Sequence[str] | None = None,
    extra: str = "",
) -> Path:
    exposing = (
        f"expose = {json.dumps(list(expose))}" if expose is not None else "expose_tools = true"
    )
    text = f"[gateway]\n{exposing}\n" + "".join(_toml_backend(n, b) for n, b in backends.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + extra)
    return path


@asynccontextmanager
async def front(
    arm: Arm,
    backends: dict[str, Backend],
    workdir: Path,
    *,
    expose: Sequence[str] | None = None,
    agents: str = "",
) -> AsyncGenerator[Front]:
    """The arm's proxy process in front of `backends` (names matter to agent-gateway only)."""
    if arm.kind == "agent-gateway":
        config = gateway_config(workdir / "gateway.toml", backends, expose=expose, extra=agents)
        command = [GATEWAY, "serve", "--http", "127.0.0.1:0", "--config", str(config)]
        async with running(command, ready=READY, env=dict(arm.env)) as process:
            yield Front(process.url, process.pid)
    elif arm.kind == "mcp-proxy":
        (backend,) = backends.values()  # it serves one server per URL: no aggregate
        port = free_port()
        command = [
            str(peer_bin("mcp-proxy", "mcp-proxy")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",  # INFO would log every request; spare it that cost
            "WARNING",
            "--",
            *backend.command,
        ]
        url = f"http://127.0.0.1:{port}/mcp"
        async with running(command, port=port, url=url) as process:
            yield Front(process.url, process.pid)
    elif arm.kind in ("fastmcp", "fastmcp-fresh"):
        fresh = ["--fresh"] if arm.kind == "fastmcp-fresh" else []
        urls = [b.url for b in backends.values()]
        command = [str(peer_bin("fastmcp", "python")), FASTMCP_PROXY, *fresh, *urls]
        env = {"FASTMCP_LOG_LEVEL": "WARNING"}
        async with running(command, ready=PEER_READY, env=env) as process:
            yield Front(process.url, process.pid)
    elif arm.kind in ("floor-relay", "floor-bare"):
        (backend,) = backends.values()
        if not backend.url:
            raise ValueError(f"{arm.name} forwards to a URL only")
        kind = arm.kind.removeprefix("floor-")
        async with running([PYTHON, FLOORS, kind, backend.url], ready=FLOOR_READY) as process:
            yield Front(process.url, process.pid)
    else:
        raise ValueError(f"{arm.name} is not a proxy")


def http_backend(arm: Arm, url: str) -> Backend:
    return Backend(url=url, protocol=arm.protocol)


def main_backend(arm: Arm, env: Env) -> Backend:
    return Backend.stdio() if arm.stdio else http_backend(arm, f"{env.downstream}/mcp")


def wide_backend(arm: Arm, env: Env) -> Backend:
    tools = str(env.sizes.wide_tools)
    return (
        Backend.stdio("--tools", tools)
        if arm.stdio
        else http_backend(arm, f"{env.downstream}/wide/mcp")
    )


def stdio_children() -> set[int]:
    """This process's children serving the downstream over stdio."""
    found: set[int] = set()
    for child in psutil.Process().children():
        try:
            command = child.cmdline()
        except psutil.Error:  # ended meanwhile
            continue
        if command[1:3] == [DOWNSTREAM, "--stdio"]:
            found.add(child.pid)
    return found


def new_stdio_child(before: set[int]) -> int:
    """The one stdio downstream started since `before` was taken."""
    (pid,) = stdio_children() - before
    return pid


@asynccontextmanager
async def connected(
    arm: Arm, target: str | StdioServerParameters, pid: int | None
) -> AsyncGenerator[Stack]:
    before = stdio_children()
    async with Client(target, cache=None) as client:
        url = target if isinstance(target, str) else None
        measured = pid if pid is not None else new_stdio_child(before)
        yield Stack(arm, client, measured, url, await tool_names(client))


@asynccontextmanager
async def open_stack(arm: Arm, env: Env, agents: str = "") -> AsyncGenerator[Stack]:
    """The arm's main stack for a round: its front (ours with the benchmark's agents) and a
    connected client."""
    if arm.kind == "direct":
        target = (
            StdioServerParameters(command=PYTHON, args=[DOWNSTREAM, "--stdio"], cwd=REPO)
            if arm.stdio
            else f"{env.downstream}/mcp"
        )
        async with connected(arm, target, None if arm.stdio else env.downstream_pid) as stack:
            yield stack
        return
    async with AsyncExitStack() as exits:
        workdir = env.workdir / arm.name
        if arm.ours:
            backends = {"d": main_backend(arm, env), "wide": wide_backend(arm, env)}
            # Only `d` is served: the agents' 100-tool server stays behind the agents.
            running_front = await exits.enter_async_context(
                front(arm, backends, workdir, expose=["d"], agents=agents)
            )
        else:
            running_front = await exits.enter_async_context(
                front(arm, {"d": main_backend(arm, env)}, workdir)
            )
        yield await exits.enter_async_context(connected(arm, running_front.url, running_front.pid))
