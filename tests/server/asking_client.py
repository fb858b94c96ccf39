"""A 2025-11-25 client in a process of its own, for a test to kill: it calls the `assistant`
agent of the gateway at URL, and when it is shown an approval form it says `asked` on stdout
and never answers.

    python -m tests.server.asking_client URL
"""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext


async def _hold(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    print("asked", flush=True)
    await anyio.sleep_forever()
    raise AssertionError("never answered")


async def main(url: str) -> None:
    async with Client(url, mode="legacy", elicitation_callback=_hold) as client:
        await client.call_tool("assistant", {"prompt": "go"})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
