"""Gateway replicas as real processes (`serve --http --stateless`) behind a real nginx."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from tests.server.processes import stop
from tests.servers.balancer import round_robin
from tests.servers.databases import free_port

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "agent-gateway"
READY = "agent-gateway: serving MCP on "
STATE_KEY = "GW_STATE_KEY"
KEY = "k" * 48
"""The key every replica seals `requestState` with (the same one: a round may land anywhere)."""


@dataclass
class Replica:
    process: Process
    url: str = ""
    lines: list[str] = field(default_factory=list[str])
    _changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def address(self) -> str:
        return self.url.removeprefix("http://").removesuffix("/mcp")

    async def said(self, text: str) -> str:
        """Wait for a line of its stderr containing `text` (bound it with `fail_after`)."""
        while True:
            for line in self.lines:
                if text in line:
                    return line
            if self.process.returncode is not None and self._changed.is_set():
                raise AssertionError(f"replica ended without saying {text!r}: {self.lines}")
            changed = self._changed = anyio.Event()
            await changed.wait()

    async def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        assert await self.process.wait() == -signal.SIGKILL

    async def terminate(self) -> None:
        """SIGTERM, as a rolling restart sends it: the replica unwinds and exits 128 + 15."""
        self.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await self.process.wait() == 128 + signal.SIGTERM, self.lines[-5:]

    async def read(self) -> None:
        assert self.process.stderr is not None
        buffer = ""
        async for chunk in TextReceiveStream(self.process.stderr):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                self.lines.append(line)
                if READY in line:  # after the time
                    self.url = line.partition(READY)[2]
            self._changed.set()
        self._changed.set()


@dataclass
class Cluster:
    url: str
    """nginx's /mcp."""
    replicas: list[Replica]
    answered_by: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    """The method of each request sent with `http()` and the replica (HOST:PORT) that
    answered it, in order."""

    def answered(self, method: str) -> list[str]:
        """The replicas that answered the requests of `method`, in order."""
        return [replica for m, replica in self.answered_by if m == method]

    def http(self, **kwargs: object) -> httpx2.AsyncClient:
        """An HTTP client for the SDK that notes which replica answered each request."""

        async def note(response: httpx2.Response) -> None:
            body = response.request.content
            method = json.loads(body).get("method", "?") if body else response.request.method
            self.answered_by.append((method, response.headers.get("x-upstream", "?")))

        return httpx2.AsyncClient(event_hooks={"response": [note]}, timeout=60, **kwargs)  # pyright: ignore[reportArgumentType]

    async def saying(self, text: str) -> Replica:
        """The first replica to say `text` on stderr (bound it with `fail_after`)."""
        found: list[Replica] = []
        async with anyio.create_task_group() as tg:

            async def watch(replica: Replica) -> None:
                await replica.said(text)
                found.append(replica)
                tg.cancel_scope.cancel()

            for replica in self.replicas:
                tg.start_soon(watch, replica)
        return found[0]

    def replica_at(self, address: str) -> Replica:
        [found] = [r for r in self.replicas if r.address == address]
        return found


def config(
    directory: Path, nginx_port: int, body: str, *, store: str | None = None, gateway: str = ""
) -> Path:
    """A config accepting requests through nginx, on `store` if given, plus `body` (and
    `gateway` lines in [gateway])."""
    path = directory / "agent-gateway.toml"
    stored = f'[store]\nurl = "{store}"\ntakeover_seconds = 0.2\n' if store else ""
    path.write_text(
        f'[gateway]\nallowed_hosts = ["127.0.0.1:{nginx_port}"]\nstate_key_env = "{STATE_KEY}"\n'
        f"{gateway}\n{stored}{body}"
    )
    return path


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", STATE_KEY: KEY}


@asynccontextmanager
async def cluster(
    config: Path | Sequence[Path], nginx_port: int, *, count: int = 2, retries: bool = False
) -> AsyncGenerator[Cluster]:
    """`count` replicas of `serve --http --stateless` on `config` (or one on each config
    given), behind nginx on `nginx_port` (`retries`: `round_robin`'s); every process
    stopped on exit."""
    configs = [config] * count if isinstance(config, Path) else config
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        replicas: list[Replica] = []
        for each in configs:
            replicas.append(await stack.enter_async_context(_replica(each, tg)))
        with anyio.fail_after(60):
            for replica in replicas:
                await replica.said(READY)
        base = await stack.enter_async_context(
            round_robin(nginx_port, [r.address for r in replicas], retries=retries)
        )
        yield Cluster(f"{base}/mcp", replicas)


@asynccontextmanager
async def _replica(config: Path, tg: anyio.abc.TaskGroup) -> AsyncGenerator[Replica]:
    command = [
        str(SCRIPT),
        "-v",
        "serve",
        "--http",
        "127.0.0.1:0",
        "--stateless",
        "--config",
        str(config),
    ]
    process = await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=REPO, env=env()
    )
    replica = Replica(process)
    tg.start_soon(replica.read)
    try:
        yield replica
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=env(), timeout=40
    )


def runs_json(store: str, *args: str) -> list[dict[str, object]]:
    listed = cli("runs", "list", "--json", "--store", store, *args)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


def free_ports(n: int) -> Sequence[int]:
    return [free_port() for _ in range(n)]
