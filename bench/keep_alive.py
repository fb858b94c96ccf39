"""Clients that call again just as the server closes their idle connection.

    python -m bench keep-alive [--checkout DIR ...] [--clients 40] [--calls 7]
                               [--pause 5.0] [--spread 0.02] [--server-keep-alive 5]

The mcp SDK's `Client` keeps an idle HTTP connection for 5 s (httpx2's `keepalive_expiry`).
A server that closes one idle as long (uvicorn's default `timeout_keep_alive`) may do so just
as the client sends its next request on it: no answer, `httpx2.ReadError`, and the client's
session dies (bench/RESULTS.md, item 56). `--clients` SDK clients call `echo` `--calls` times
each, every client with a pause of its own between calls, spread over `--pause` +- `--spread`
/ 2 seconds, against:
- `uvicorn, keep-alive N s`: the benchmark downstream with `--server-keep-alive` N (uvicorn's 5);
- `agent-gateway`: `serve --http` of this checkout (and of each `--checkout`), `expose_tools`
  in front of the downstream on its own default (120 s).
Printed per target: the clients whose session died, and the calls answered. No timing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from mcp import Client  # noqa: E402

from bench._processes import READY, running  # noqa: E402
from bench.downstream import READY as DOWNSTREAM_READY  # noqa: E402

GATEWAY = str(Path(sys.executable).parent / "agent-gateway")
DOWNSTREAM = str(REPO / "bench" / "downstream.py")
PYTHON = sys.executable


async def clients_died(
    url: str, tool: str, *, clients: int, calls: int, pause: float, spread: float
) -> tuple[int, int, list[str]]:
    """(clients whose session died, calls answered, their errors)."""
    answered = 0
    errors: list[str] = []

    async def client(i: int) -> None:
        nonlocal answered
        wait = pause - spread / 2 + spread * i / max(1, clients - 1)
        try:
            # A session that dies ends the task it was opened in: a task of its own each.
            async with Client(url, cache=None) as session:
                for call in range(calls):
                    if call:
                        await anyio.sleep(wait)
                    result = await session.call_tool(tool, {"message": "x"})
                    if result.is_error:
                        raise RuntimeError(f"{tool} failed: {result.content}")
                    answered += 1
        except Exception as exc:
            errors.append(repr(exc))

    async with anyio.create_task_group() as tg:
        for i in range(clients):
            tg.start_soon(client, i)
    return len(errors), answered, errors


async def run(options: argparse.Namespace) -> list[tuple[str, int, int, list[str]]]:
    measure = {
        "clients": options.clients,
        "calls": options.calls,
        "pause": options.pause,
        "spread": options.spread,
    }
    rows: list[tuple[str, int, int, list[str]]] = []
    async with AsyncExitStack() as stack:
        closing = await stack.enter_async_context(
            running(
                [PYTHON, DOWNSTREAM, "--http", "--keep-alive", str(options.server_keep_alive)],
                ready=DOWNSTREAM_READY,
            )
        )
        keeping = await stack.enter_async_context(
            running([PYTHON, DOWNSTREAM, "--http"], ready=DOWNSTREAM_READY)
        )
        label = f"uvicorn, keep-alive {options.server_keep_alive} s"
        rows.append((label, *await clients_died(f"{closing.url}/mcp", "echo", **measure)))
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        config = workdir / "gateway.toml"
        config.write_text(
            f'[gateway]\nexpose_tools = true\n[mcpServers.d]\nurl = "{keeping.url}/mcp"\n'
        )
        for checkout in [str(REPO), *options.checkout]:
            command = [GATEWAY, "serve", "--http", "127.0.0.1:0", "--config", str(config)]
            env = {"PYTHONPATH": checkout}
            async with running(command, ready=READY, env=env) as front:
                name = "agent-gateway" + ("" if checkout == str(REPO) else f" ({checkout})")
                rows.append((name, *await clients_died(front.url, "d__echo", **measure)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench keep-alive", description=(__doc__ or "").split("\n\n")[1]
    )
    parser.add_argument("--checkout", action="append", default=[], help="another checkout too")
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--calls", type=int, default=7)
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between calls")
    parser.add_argument("--spread", type=float, default=0.02)
    parser.add_argument("--server-keep-alive", type=int, default=5)
    options = parser.parse_args()
    options.checkout = [str(Path(checkout).resolve()) for checkout in options.checkout]
    rows = anyio.run(run, options)
    print(f"{'target':<40} {'clients died':>13} {'calls answered':>15}")
    for name, died, answered, errors in rows:
        print(f"{name:<40} {f'{died}/{options.clients}':>13} {answered:>15}")
        for error in sorted(set(errors)):
            print(f"    {error[:160]}")


if __name__ == "__main__":
    main()
