"""A foreign client: the MCP Inspector CLI lists and calls our tools over stdio and HTTP.

Needs the Inspector in `<repo>/.servers/inspector` (`.ci/install-inspector`); skipped without
it unless AGENT_GATEWAY_REQUIRE_SERVERS=1.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from .processes import REPO, SCRIPT, TIMES_42, http_server, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

LAUNCHER = (
    REPO
    / ".servers/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
)
TOKEN = "inspector-test-token"


@pytest.fixture
def inspector(tmp_path: Path) -> list[str]:
    node = shutil.which("node")
    if node is None or not LAUNCHER.is_file():
        reason = f"the MCP Inspector is not installed ({LAUNCHER}); run .ci/install-inspector"
        if os.environ.get("AGENT_GATEWAY_REQUIRE_SERVERS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return [node, str(LAUNCHER), "--cli", "--format", "json", "-q"]


async def run_inspector(command: list[str], home: Path) -> dict[str, Any]:
    # The Inspector keeps state in ~/.mcp-inspector: a fresh HOME keeps the machine's out.
    env = {**os.environ, "HOME": str(home)}
    with anyio.fail_after(45):
        done = await anyio.run_process(command, env=env, check=False)
    output = done.stdout.decode()
    assert done.returncode == 0, f"{command}: {output} {done.stderr.decode()}"
    reply: dict[str, Any] = json.loads(output)["result"]
    return reply


async def check_with_inspector(inspector: list[str], target: list[str], home: Path) -> None:
    listing = await run_inspector([*inspector, "--method", "tools/list", *target], home)
    assert [t["name"] for t in listing["tools"]] == ["assistant", "calculator"]
    answer = await run_inspector(
        [
            *inspector,
            "--method",
            "tools/call",
            "--tool-name",
            "assistant",
            "--tool-args-json",
            '{"prompt": "What is 6 * 7?"}',
            *target,
        ],
        home,
    )
    assert answer["content"] == [{"type": "text", "text": "It is 42."}]
    assert answer["structuredContent"]["output"] == "It is 42."
    proxied = await run_inspector(
        [
            *inspector,
            "--method",
            "tools/call",
            "--tool-name",
            "calculator",
            "--tool-args-json",
            '{"expression": "2 ** 10"}',
            *target,
        ],
        home,
    )
    assert proxied["structuredContent"] == {"response": "1024"}


async def test_the_inspector_over_stdio(inspector: list[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, TIMES_42)
    target = ["--", str(SCRIPT), "serve", "--stdio", "--config", str(config)]
    await check_with_inspector(inspector, target, tmp_path)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_inspector_over_http(inspector: list[str], tmp_path: Path, era: str) -> None:
    config = write_config(tmp_path, TIMES_42, gateway='tokens_env = "GW_INSPECTOR_TOKENS"')
    async with http_server(config, env={"GW_INSPECTOR_TOKENS": TOKEN}) as served:
        # --header takes several values: it goes last, after the URL.
        target = [
            "--protocol-era",
            era,
            "--server-url",
            served.url,
            "--header",
            f"Authorization: Bearer {TOKEN}",
        ]
        await check_with_inspector(inspector, target, tmp_path)
