from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.messages import ToolDefinition

from .support import Sleeps

FIXTURES = Path(__file__).parent / "fixtures"


def load_tools(server: str) -> list[ToolDefinition]:
    """Tools as a real MCP server listed them (`fixtures/<server>.json`)."""
    data: Any = json.loads((FIXTURES / f"{server}.json").read_text())
    return [
        ToolDefinition(
            name=tool["name"],
            description=tool.get("description", ""),
            input_schema=tool["inputSchema"],
            source_node=server,
        )
        for tool in data["tools"]
    ]


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
