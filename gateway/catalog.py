"""One catalog: what the nodes offer, listed the same way wherever the gateway lists it.

Agent runs (the tools an agent may call) and every list the gateway serves (tools, prompts,
resources, resource templates) are listed with these three pieces:

- `list_each`: every node asked at once, the answers kept in the nodes' order. For served lists
  a node that cannot list (down, failing) is left out, so one server never hides the others:
  warned of once while it cannot (`LeftOut`: a client listing every second would repeat it
  for as long as the server is down), and said again (INFO) once it lists again.
- `claim`: names taken in that order. A name two nodes list is a conflict: refused
  (`ToolConflict`, naming the remedy) where the caller needs every name to be one thing, else
  the first node keeps it and a warning says so (once per clash, for a list served again
  and again).
- `Routes`: what the last listing routed each name to. A name it does not know is listed again
  before it is refused: a client may call without listing, and a node's list may have changed
  since (nodes re-list their server's tools themselves on its `list_changed`).
"""

from __future__ import annotations

import difflib
import logging
import operator
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

import anyio
from mcp.shared.exceptions import MCPError

from toolkits import ToolkitError

from .errors import ToolConflict

__all__ = [
    "MAX_ECHOED",
    "LeftOut",
    "Named",
    "Routes",
    "claim",
    "echoed",
    "list_each",
    "same_objects",
]

log = logging.getLogger(__name__)


MAX_ECHOED = 200
"""Characters of a client's own input (a name, a URI, a method) an error quotes back."""


def echoed(text: str) -> str:
    """`text` quoted as an error echoes it: `repr`, its first `MAX_ECHOED` characters only
    (and "..."), so a client that sends 100 kB does not get them back."""
    if len(text) <= MAX_ECHOED:
        return repr(text)
    return f"{text[:MAX_ECHOED]!r}... ({len(text)} characters)"


class Named(Protocol):
    @property
    def name(self) -> str: ...


_LISTED_IN_FULL = 10
"""Up to this many names, an unknown name's error lists them all."""

_N = TypeVar("_N", bound=Named)
_Item = TypeVar("_Item")
_V = TypeVar("_V")


class LeftOut:
    """The nodes left out of one kind of list (`what`: "resources", "prompts", ...) because
    they could not list it: each outage is warned of once, and its end said."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._out: dict[str, str] = {}
        """The nodes left out, each with why its last listing failed."""

    def failed(self, node: str, exc: Exception) -> None:
        known = node in self._out
        self._out[node] = str(exc)
        if not known:
            log.warning(
                "node %r: cannot list its %s (left out until it can; said once): %s",
                node,
                self.what,
                exc,
            )

    def listed(self, node: str) -> None:
        if self._out.pop(node, None) is not None:
            log.info("node %r: lists its %s again", node, self.what)

    def unlisted(self, name: str, what: str) -> str | None:
        """Why `name` (a `what`) may be missing from the last listing: the nodes it left out
        and why (a server that does not answer lists nothing, and has all the same what a
        client asks for); None if it left none out."""
        if not self._out:
            return None
        why = "; ".join(f"node {node!r}: {said}" for node, said in self._out.items())
        return f"no {what} named {echoed(name)} is listed, and not every node could list its {self.what}: {why}"


async def list_each(
    nodes: Sequence[_N],
    fetch: Callable[[_N], Awaitable[Sequence[_Item]]],
    *,
    left_out: LeftOut | None = None,
) -> list[tuple[_N, Sequence[_Item]]]:
    """`fetch(node)` for every node at once, in the nodes' order.

    With `left_out` (kept by the caller from one listing to the next), a node whose fetch
    raises a `ToolkitError` or an `MCPError` lists nothing; without it, the error propagates.
    """
    listed: dict[int, Sequence[_Item]] = {}

    async def one(index: int, node: _N) -> None:
        if left_out is None:
            listed[index] = await fetch(node)
            return
        try:
            listed[index] = await fetch(node)
        except (ToolkitError, MCPError) as exc:
            left_out.failed(node.name, exc)
            listed[index] = []
        else:
            left_out.listed(node.name)

    async with anyio.create_task_group() as tg:
        for index, node in enumerate(nodes):
            tg.start_soon(one, index, node)
    return [(node, listed[index]) for index, node in enumerate(nodes)]


def same_objects(kept: Sequence[object], now: Sequence[object]) -> bool:
    """Whether `now` holds the very objects `kept` holds, in order (what was made of `kept`
    still holds for `now`, if each is replaced rather than changed)."""
    return len(kept) == len(now) and all(map(operator.is_, kept, now))


def claim(
    routes: dict[str, _V],
    name: str,
    value: _V,
    *,
    node_of: Callable[[_V], str],
    what: str,
    refuse: str | None = None,
    scope: str | None = None,
    warned: set[str] | None = None,
) -> bool:
    """Route `name` to `value` unless an earlier one holds it; True if it is newly `value`'s.

    A name held by another node is a conflict: with `refuse` (the remedy to name), raises
    `ToolConflict`; else the first holder keeps it, with a warning. `scope` prefixes the
    message (whose list it is). `warned`: the conflicts already warned of, for a caller that
    claims again at every listing to warn of each once.
    """
    held = routes.get(name)
    if held is None:
        routes[name] = value
        return True
    first, second = node_of(held), node_of(value)
    if held is value or first == second:
        return False
    conflict = f"{what} {name!r} is listed by nodes {first!r} and {second!r}"
    if scope is not None:
        conflict = f"{scope}: {conflict}"
    if refuse is not None:
        raise ToolConflict(f"{conflict}; {refuse}")
    if warned is None or conflict not in warned:
        log.warning("%s; serving %r's", conflict, first)
        if warned is not None:
            warned.add(conflict)
    return False


class Routes(Generic[_V]):
    """Names to what serves them, as the last listing (`update`) found them."""

    def __init__(self, relist: Callable[[], Awaitable[object]]) -> None:
        """`relist` lists again, and updates these routes."""
        self._relist = relist
        self._routes: dict[str, _V] = {}

    def update(self, routes: dict[str, _V]) -> None:
        self._routes = routes

    def get(self, name: str) -> _V | None:
        """What the last listing routed `name` to."""
        return self._routes.get(name)

    async def find(self, name: str) -> _V | None:
        """What serves `name`, listing again if the last listing did not have it."""
        found = self._routes.get(name)
        if found is None:
            await self._relist()
            found = self._routes.get(name)
        return found

    def unknown(self, name: str, what: str) -> str:
        """Why `name` (a `what`) is refused, short enough for a model to read: every name
        routed if they are few, else the closest ones and how many there are."""
        if len(self._routes) <= _LISTED_IN_FULL:
            known = ", ".join(sorted(self._routes)) or "none"
            return f"no {what} named {echoed(name)} ({what}s: {known})"
        # No name served is that long: nothing to guess, and no time spent comparing.
        too_long = len(name) > MAX_ECHOED
        close = [] if too_long else difflib.get_close_matches(name, list(self._routes), n=3)
        guess = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        count = len(self._routes)
        return f"no {what} named {echoed(name)}{guess} ({count} {what}s: {what}s/list names them)"
