"""A tool schema's local `$ref`s: kept where the provider takes them, written out where not.

- `with_defs`: the `$ref`s to the root's `$defs` (or draft-07 `definitions`, sent as `$defs`)
  kept as they are, the definitions they reach gathered under the root's `$defs` (the ones
  nothing reaches left out). OpenAI and Anthropic take that, recursion included; a recursive
  type is told whole. A `$ref` anywhere else (`#`, `#/properties/a`) is written out in place.
- `inline_refs`: every local `$ref` written out in place (Gemini's `parameters` have no
  `$ref`). A recursive one is expanded `_MAX_REF_REPEATS` times, then left unconstrained.

Writing out is bounded by `INLINE_BUDGET` schema nodes: definitions shared along a DAG double
at each level (18 levels of two properties to the next: 2.6 KB written out is 28 MB), and a
server's schema is sent on every model call. Past it, the definitions written out the most
times are left unconstrained instead (see `_left_open`), their name and why said in the
description; the tool still checks what it gets.

Both write draft-07 tuples (`items` as a list) as 2020-12 `prefixItems`, and drop `$schema`,
`$id` and `$comment`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from ._json import JSONObject, arr, is_arr, is_obj, obj

__all__ = ["INLINE_BUDGET", "inline_refs", "with_defs"]

INLINE_BUDGET = 2_000
"""Schema nodes (JSON objects) a schema may have once its `$ref`s are written out, or
`_GROWTH` times its own, if more: several times what a large real tool has (a pydantic model
of a few dozen nested types), some tens of KB per tool per request; and a schema large as
written is never cut below its own size, only what sharing adds is bounded."""
_GROWTH = 2
_MAX_REF_REPEATS = 2
_DROPPED = frozenset({"$schema", "$id", "$comment", "$defs", "definitions", "additionalItems"})
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_COMBINATORS = ("allOf", "oneOf", "anyOf")
_DEFS = "#/$defs/"


def inline_refs(schema: Mapping[str, Any], budget: int = INLINE_BUDGET) -> JSONObject:
    """A copy of `schema` (sharing nothing with it) with every local `$ref` written out in
    place, within `budget` nodes (see the module's docstring)."""
    root = dict(schema)
    return obj(_Walk(root, {}, budget).node(root, ()))


def with_defs(schema: Mapping[str, Any], budget: int = INLINE_BUDGET) -> JSONObject:
    """A copy of `schema` with its `$ref`s to definitions kept and the definitions they reach
    under `$defs` at its root (last). A `$ref` at the root, or in an `allOf`/`oneOf`/`anyOf`
    at the root, is written out there: the root must be an object with its properties."""
    root = dict(schema)
    names = _definition_names(root)
    walk = _Walk(root, names, budget)
    out = obj(walk.node(_root_resolved(root, root, ()), ()))
    origin = {sent: key for key, sent in names.items()}
    bodies: dict[str, Any] = {}
    while pending := [name for name in walk.reached if name not in bodies]:
        for name in pending:
            group, own = origin[name]
            bodies[name] = walk.node(obj(root[group]).get(own), ())
    if bodies:
        out["$defs"] = {name: bodies[name] for name in names.values() if name in bodies}
    return out


def _definition_names(root: JSONObject) -> dict[tuple[str, str], str]:
    """Each definition (`("$defs", name)`, `("definitions", name)`) and its name under `$defs`
    as sent: its own, or (a draft-07 one whose name a `$defs` one has) with a suffix."""
    names: dict[tuple[str, str], str] = {}
    for group in ("$defs", "definitions"):
        for name in obj(root.get(group)):
            sent = name
            while sent in names.values():
                sent += "_"
            names[(group, name)] = sent
    return names


def _root_resolved(node: JSONObject, root: JSONObject, seen: tuple[str, ...]) -> JSONObject:
    """`node` with a `$ref` at it and in its combinators written out one level (their own
    `$ref`s stay), so that a root's alternatives can be folded into its properties."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref not in seen:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _root_resolved({**_resolve(ref, root), **siblings}, root, (*seen, ref))
    out = dict(node)
    for key in _COMBINATORS:
        if is_arr(node.get(key)):
            out[key] = [_root_resolved(obj(part), root, seen) for part in node[key]]
    return out


class _Walk:
    """One schema's `$ref`s written out or kept, within one node budget for all of it."""

    def __init__(self, root: JSONObject, kept: Mapping[tuple[str, str], str], budget: int):
        self.root = root
        self.kept = kept
        # Never below the schema as written: only what sharing adds is bounded.
        self.budget = max(budget, _GROWTH * _nodes(root, within_defs=True))
        self.used = 0
        self.reached: list[str] = []
        """The definitions a kept `$ref` names, in the order first met."""
        self.left_open = set[tuple[str, str]]() if kept else _left_open(root, self.budget)

    def node(self, node: Any, stack: tuple[str, ...]) -> Any:
        if is_arr(node):
            return [self.node(item, stack) for item in node]
        if not is_obj(node):
            return node
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return self._keywords(node, stack)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        definition = _definition(ref)
        kept = self.kept.get(definition) if definition else None
        if kept is not None:
            if kept not in self.reached:
                self.reached.append(kept)
            pointer = _DEFS + kept.replace("~", "~0").replace("/", "~1")
            return {"$ref": pointer, **self._keywords(siblings, stack)}
        if stack.count(ref) >= _MAX_REF_REPEATS:
            return self._keywords(siblings, stack)  # recursion cut: unconstrained from here
        if definition in self.left_open or self.used > self.budget:
            # The budget is met on the way only where recursion outgrew `_left_open`'s count.
            return self._keywords(_said_open(siblings, ref), stack)
        target = _resolve(ref, self.root)
        merged = {**target, **siblings}  # keywords beside a $ref refine it (2020-12 semantics)
        return self.node(merged, (*stack, ref))

    def _keywords(self, node: JSONObject, stack: tuple[str, ...]) -> JSONObject:
        self.used += 1
        out: JSONObject = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key in _NAME_MAPS and is_obj(value):
                # Keys here are property names, not keywords: a property may be called "$id".
                out[key] = {name: self.node(sub, stack) for name, sub in value.items()}
            elif key == "items" and is_arr(value):
                # A draft-07 tuple: 2020-12 (what providers read) says `prefixItems`, and
                # `items` is then what follows the tuple (draft-07's `additionalItems`).
                out["prefixItems"] = self.node(value, stack)
                if "additionalItems" in node:
                    out["items"] = self.node(node["additionalItems"], stack)
            else:
                out[key] = self.node(value, stack)
        return out


_Definition = tuple[str, str]


def _definition(ref: str) -> _Definition | None:
    """The definition `ref` names (`("$defs", "Node")`), if it names one."""
    tokens = _tokens(ref)
    if tokens is None or len(tokens) != 2 or tokens[0] not in ("$defs", "definitions"):
        return None
    return tokens[0], tokens[1]


def _left_open(root: JSONObject, budget: int) -> set[_Definition]:
    """The definitions to leave unconstrained so that `root` written out has at most `budget`
    nodes: those written out more than N times, N the largest that fits (in a DAG, the deepest
    shared types; the levels above them are kept). A recursive `$ref` is not counted here (it
    is cut after `_MAX_REF_REPEATS`)."""
    bodies = {
        (group, name): body
        for group in ("$defs", "definitions")
        for name, body in obj(root.get(group)).items()
    }
    if not bodies:
        return set()
    top = {k: v for k, v in root.items() if k not in ("$defs", "definitions")}
    top_refs = [d for d in _refs_in(top) if d in bodies]
    edges = {d: [r for r in _refs_in(body) if r in bodies] for d, body in bodies.items()}
    own = {d: _nodes(body) for d, body in bodies.items()}
    order = _top_down(top_refs, edges)
    place = {d: n for n, d in enumerate(order)}
    base = _nodes(top)

    def written(most: int | None) -> tuple[set[_Definition], int]:
        """What is left open with at most `most` copies of a definition, and the nodes then
        written out (or a number past `budget`, once it is)."""
        copies = dict.fromkeys(order, 0)
        for d in top_refs:
            copies[d] += 1
        opened: set[_Definition] = set()
        total = base
        for d in order:
            count = copies[d]
            if most is not None and count > most:
                opened.add(d)
                total += count
                continue
            total += count * own[d]
            if total > budget:
                break
            for child in edges[d]:
                if place[child] > place[d]:  # not a recursive $ref back up
                    copies[child] = min(copies[child] + count, budget + 1)
        return opened, total

    if written(None)[1] <= budget:
        return set()
    # Fewer copies allowed leave more open and write out less: the most that fits, halving.
    low, high = 0, budget
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if written(middle)[1] <= budget else (low, middle - 1)
    return written(low)[0]


def _top_down(
    top: list[_Definition], edges: Mapping[_Definition, list[_Definition]]
) -> list[_Definition]:
    """The definitions reached from `top`, each before those it reaches (but through a
    recursive `$ref`): a DFS post-order, reversed."""
    order: list[_Definition] = []
    seen: set[_Definition] = set()
    for start in dict.fromkeys(top):
        if start in seen:
            continue
        seen.add(start)
        path = [(start, iter(dict.fromkeys(edges[start])))]
        while path:
            at, children = path[-1]
            child = next(children, None)
            if child is None:
                path.pop()
                order.append(at)
            elif child not in seen:
                seen.add(child)
                path.append((child, iter(dict.fromkeys(edges[child]))))
    return order[::-1]


def _refs_in(node: Any) -> list[_Definition]:
    """The definitions the `$ref`s in `node` name, once per `$ref`."""
    found: list[_Definition] = []
    for at in _objects(node, _DEFINITION_GROUPS):
        ref = at.get("$ref")
        definition = _definition(ref) if isinstance(ref, str) else None
        found += [definition] if definition else []
    return found


def _nodes(node: Any, *, within_defs: bool = False) -> int:
    """The JSON objects in `node`, but for the definitions under it (unless `within_defs`)."""
    return sum(1 for _ in _objects(node, () if within_defs else _DEFINITION_GROUPS))


_DEFINITION_GROUPS = ("$defs", "definitions")


def _objects(node: Any, skipped: tuple[str, ...]) -> Iterator[JSONObject]:
    """Every JSON object in `node`, itself included, but under the keys `skipped`."""
    pending = [node]
    while pending:
        at = pending.pop()
        if is_arr(at):
            pending += at
        elif is_obj(at):
            yield at
            pending += [v for k, v in at.items() if k not in skipped]


def _said_open(siblings: JSONObject, ref: str) -> JSONObject:
    """`siblings` (a `$ref`'s), saying why the value they describe is left open."""
    name = (_tokens(ref) or [ref])[-1]
    said = f"Any value is accepted: the `{name}` schema is too large to write out here."
    description = siblings.get("description")
    full = f"{description} {said}" if isinstance(description, str) and description else said
    return {**siblings, "description": full}


def _tokens(ref: str) -> list[str] | None:
    """The JSON-pointer tokens of a local `ref`, or None for a remote one."""
    if not ref.startswith("#"):
        return None
    # A URI fragment: percent-encoded first (`My%20Type`), then JSON-pointer escaped.
    return [
        unquote(token).replace("~1", "/").replace("~0", "~")
        for token in ref.removeprefix("#").strip("/").split("/")
        if token
    ]


def _resolve(ref: str, root: JSONObject) -> JSONObject:
    tokens = _tokens(ref)
    if tokens is None:
        return {}  # remote refs are not fetched: the model gets an open schema instead
    node: Any = root
    for key in tokens:
        node = obj(node).get(key) if is_obj(node) else _item(node, key)
    return obj(node)


def _item(node: Any, key: str) -> Any:
    items = arr(node)
    return items[int(key)] if key.isdigit() and int(key) < len(items) else None
