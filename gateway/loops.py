"""Gateways in a loop: the tools that came around it are left out of every listing.

Every tool a gateway serves says in its `_meta` (`VIA_META_KEY`) which gateways it came
through, each named by the id it made when it started (`new_gateway_id`), the one serving it
last: its own tool `[A]`; served again by B, `[A, B]` (`stamped`). When two gateways expose
each other's tools, each would otherwise list the other's listing again, with one more
`peer__` prefix, without end: a call carries its hop count, but a listing is answered from
the nodes' kept tools and their `list_changed` bounces between the two.

So a gateway leaves out of its listings (an agent's tools, every served list) a node's tool
(`LoopGuard.kept`):

- whose chain holds its own id: its own tool, come back around the loop;
- whose chain is `max_depth` long: a call of it would reach its gateway with as many hops, and
  be refused there. This also bounds loops of gateways that start each other over stdio,
  where every copy is a new process with an id of its own.

Each node's left-out tools are warned of once. Listings pay for this (and only when a node's
tools changed), never a call: a call's guard is its hop count (`HOPS_META_KEY`).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, cast

import mcp_types as types

from toolkits import Tool

__all__ = [
    "SPAWN_DEPTH_ENV",
    "VIA_META_KEY",
    "LoopGuard",
    "Stamps",
    "chain_in",
    "new_gateway_id",
    "spawn_depth",
]

log = logging.getLogger(__name__)

VIA_META_KEY = "agent-gateway/via"
"""The `_meta` key of a served tool: the ids of the gateways it came through, in order."""

_SHOWN = 5
"""Left-out tools named in a warning, at most."""

SPAWN_DEPTH_ENV = "AGENT_GATEWAY_SPAWN_DEPTH"
"""What a gateway tells each stdio server it starts: how many gateways started it, one more
than its own (`spawn_depth`). Gateways that start each other stop at the depth limit."""


def spawn_depth() -> int:
    """How many gateways in a chain started this process as a stdio server (0: none)."""
    try:
        return max(0, int(os.environ.get(SPAWN_DEPTH_ENV, "0")))
    except ValueError:
        return 0


def new_gateway_id() -> str:
    """A new gateway's id: random, so no two gateways share one."""
    return secrets.token_hex(6)


def chain_in(meta: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The gateways a tool came through, from its definition's `_meta` (none: not served by
    a gateway, or said in another form)."""
    via: object = meta.get(VIA_META_KEY) if meta else None
    if not isinstance(via, list):
        return ()
    hops = tuple(cast("list[object]", via))
    return cast("tuple[str, ...]", hops) if all(isinstance(h, str) for h in hops) else ()


def _chain_of(tool: Tool) -> tuple[str, ...]:
    return chain_in(tool.definition.meta) if tool.definition is not None else ()


class LoopGuard:
    """Which of a node's tools a gateway lists (see the module docstring)."""

    def __init__(self, gateway_id: str) -> None:
        self.gateway_id = gateway_id
        self._warned: set[tuple[str, str]] = set()
        """(node, why) already warned of: a node's listing is taken again at every change."""

    def kept(self, tools: Sequence[Tool], max_depth: int) -> Sequence[Tool]:
        """`tools` (one node's) without those come around a loop or `max_depth` gateways
        deep; `tools` itself when none is."""
        looped: list[Tool] = []
        deep: list[Tool] = []
        for tool in tools:
            chain = _chain_of(tool)
            if self.gateway_id in chain:
                looped.append(tool)
            elif len(chain) >= max_depth:
                deep.append(tool)
        if not (looped or deep):
            return tools
        self._warn(looped, "loop", max_depth)
        self._warn(deep, "deep", max_depth)
        left_out = {id(tool) for tool in (*looped, *deep)}
        return [tool for tool in tools if id(tool) not in left_out]

    def _warn(self, tools: list[Tool], why: str, max_depth: int) -> None:
        if not tools:
            return
        node = tools[0].source_node
        if (node, why) in self._warned:
            return
        self._warned.add((node, why))
        names = ", ".join(tool.name for tool in tools[:_SHOWN])
        if len(tools) > _SHOWN:
            names += f" and {len(tools) - _SHOWN} more"
        if why == "loop":
            chain = " -> ".join((*_chain_of(tools[0]), "here"))
            log.warning(
                "node %r offers this gateway's own tools back: the gateways are in a loop "
                "(this gateway is %s; the tools came %s); left out: %s. Expose the other "
                "gateway's tools on one side only (gateway.expose without node %r)",
                node,
                self.gateway_id,
                chain,
                names,
                node,
            )
        else:
            log.warning(
                "node %r offers tools that came through %d gateways, as many as the depth "
                "limit (gateway.max_depth = %d), so a call of them would be refused; "
                "left out: %s",
                node,
                len(_chain_of(tools[0])),
                max_depth,
                names,
            )


class Stamps:
    """A gateway's served tools with its id added to their chains (`VIA_META_KEY`), each
    stamped once while the tool is the same object."""

    def __init__(self, gateway_id: str) -> None:
        self.gateway_id = gateway_id
        self._kept: dict[int, tuple[types.Tool, types.Tool]] = {}

    def stamped(self, tools: Sequence[types.Tool]) -> list[types.Tool]:
        """`tools` as served: each with `[*its chain, this gateway]` in its `_meta`."""
        kept: dict[int, tuple[types.Tool, types.Tool]] = {}
        served: list[types.Tool] = []
        for tool in tools:
            found = self._kept.get(id(tool))
            if found is None or found[0] is not tool:
                found = (tool, self._stamp(tool))
            kept[id(tool)] = found
            served.append(found[1])
        self._kept = kept
        return served

    def _stamp(self, tool: types.Tool) -> types.Tool:
        via = [*chain_in(tool.meta), self.gateway_id]
        return tool.model_copy(update={"meta": {**(tool.meta or {}), VIA_META_KEY: via}})
