"""Which of a server's tools the model sees, and under which names.

Model-facing names match `^[A-Za-z0-9_-]{1,64}$` (what every provider accepts). They are made
deterministically from the server's own names: other characters become `_`, a name too long
keeps its head and gains `_` plus 8 hex digits of a hash of the original, and two tools of one
node that sanitise alike are told apart the same way (the one that needed no change keeps the
plain name). The prefix policy then decides `server__tool` or `tool`; `auto` needs to know the
other nodes' names, so resolution takes every node at once (`resolve_tool_names`). A name of
the form `server__tool` is that server's alone: another server's tool so named is prefixed, and
a prefixed name of another server's form (server `a`'s `b__x` beside a server `a__b`) is made
in its own.

The result is a map per node from original name to model name; routing uses its inverse, never
string splitting.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import cast

from .config import PrefixPolicy

__all__ = [
    "MAX_NAME_LENGTH",
    "PREFIX_SEPARATOR",
    "NodeTools",
    "globs_unmatched",
    "invert",
    "is_offered",
    "reserved_clashes",
    "resolve_tool_names",
    "rule_names",
    "sanitize_name",
    "unmatched_globs",
]

logger = logging.getLogger(__name__)

MAX_NAME_LENGTH = 64
PREFIX_SEPARATOR = "__"
_DIGEST_LENGTH = 8
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def _digest(key: str, salt: int = 0) -> str:
    data = key if salt == 0 else f"{key}\x00{salt}"
    return hashlib.sha256(data.encode()).hexdigest()[:_DIGEST_LENGTH]


def _with_digest(name: str, key: str, salt: int = 0) -> str:
    head = name[: MAX_NAME_LENGTH - _DIGEST_LENGTH - 1]
    return f"{head}_{_digest(key, salt)}"


def _fit(name: str, key: str) -> str:
    return name if len(name) <= MAX_NAME_LENGTH else _with_digest(name, key)


def _valid_characters(name: str) -> str:
    """`name` with each character a model refuses as `_` (and `_` for no name at all)."""
    return _INVALID.sub("_", name) or "_"


def sanitize_name(name: str) -> str:
    """`name` made valid for a model: invalid characters to `_`, at most 64 characters."""
    return _fit(_valid_characters(name), name)


def is_offered(name: str, include: Sequence[str] | None, exclude: Sequence[str]) -> bool:
    """Whether a tool passes the `include`/`exclude` fnmatch globs (exclude wins)."""
    if include is not None and not any(fnmatchcase(name, pattern) for pattern in include):
        return False
    return not any(fnmatchcase(name, pattern) for pattern in exclude)


def unmatched_globs(globs: Sequence[str], names: Sequence[str]) -> tuple[str, ...]:
    """The globs that match none of `names` (a misspelt `include` leaves its tool out)."""
    return tuple(g for g in globs if not any(fnmatchcase(name, g) for name in names))


def globs_unmatched(
    key: str,
    globs: Sequence[str],
    names: Sequence[str],
    *,
    listing: bool = False,
    of: str = "the server",
) -> str:
    """`KEY 'g': match(es) no tool of the server` (`of`), with the closest tool name of each
    glob that has one, and (`listing`) the server's tools."""
    hints = [
        f"{close[0]!r}" if len(globs) == 1 else f"{close[0]!r} for {glob!r}"
        for glob in globs
        if (close := difflib.get_close_matches(glob, names, n=1))
    ]
    said = f"{key} {', '.join(map(repr, globs))}: "
    said += f"{'matches' if len(globs) == 1 else 'match'} no tool of {of}"
    if hints:
        said += f" (did you mean {', '.join(hints)}?)"
    return f"{said}; the server's tools: {_listed(names)}" if listing else said


def _listed(names: Sequence[str], most: int = 30) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


@lru_cache(maxsize=1024)
def _unique(originals: tuple[str, ...], prefix: str | None) -> Mapping[str, str]:
    """Names for one node's tools, distinct within the node. Kept: every node's listing is
    resolved again whenever one changes (50 servers starting: 50 times), mostly unchanged."""
    head = f"{sanitize_name(prefix)}{PREFIX_SEPARATOR}" if prefix is not None else ""
    wanted = {orig: _fit(head + _valid_characters(orig), orig) for orig in dict.fromkeys(originals)}
    names: dict[str, str] = {}
    taken: set[str] = set()
    # A tool whose name needed no change keeps it; then shorter originals first: deterministic.
    for orig in sorted(wanted, key=lambda o: (sanitize_name(o) != o, len(o), o)):
        name = wanted[orig]
        salt = 0
        while name in taken:
            name = _with_digest(wanted[orig], orig, salt)
            salt += 1
        taken.add(name)
        names[orig] = name
    return {orig: names[orig] for orig in wanted}


@dataclass(frozen=True, slots=True)
class NodeTools:
    """One node's offered tools (original names, already filtered) and its prefix policy."""

    node: str
    prefix: PrefixPolicy
    tools: Sequence[str]


def resolve_tool_names(
    nodes: Sequence[NodeTools],
    reserved: Collection[str] | Mapping[str, str] = (),
    *,
    what: str = "tool",
    warned: set[tuple[str, ...]] | None = None,
) -> dict[str, dict[str, str]]:
    """Model-facing names for every node's tools (`what`: or prompts, named alike):
    `{node: {original: model_name}}`. `warned`: what was already warned of (a clash, a hash
    suffix), for a caller that resolves again and again to warn of each once.

    `reserved` names are held by tools that have no prefix to give (the gateway's local tools
    and agents; a mapping says what holds each, `"agent"`): a server's tool that would take
    one bare gets `node__tool` instead, whatever its prefix policy (`reserved_clashes` says
    which, for a warning).

    A bare name of the form `OTHER__tool`, OTHER being another node's (sanitised) name, is
    OTHER's whatever the order and which nodes list tools now: the tool gets its own
    `node__` prefix (one warning per pair of nodes), so `OTHER__tool` means OTHER's tool.
    So is a prefixed name of that form: beside a node `a__b`, node `a`'s `b__x` is not
    `a__b__x` but `a__b_x_HASH` (`_own_form`; one warning per pair of nodes).

    - `always`: `node__tool`.
    - `auto`: the bare name, unless another `auto`/`never` node offers the same bare name.
    - `never`: the bare name; if an earlier `never` node already holds it, this one falls back
      to `node__tool` (one warning per pair of nodes), since two tools cannot share a name.

    Names are unique across all nodes: any clash left over (a prefixed name that equals an
    agent's name, or one of a node whose name sanitises alike) is settled by a hash suffix on
    the later tool. Every name given a hash suffix is warned of, with its original.
    """
    bare = {n.node: _unique(tuple(n.tools), None) for n in nodes}
    spaces = {f"{sanitize_name(n.node)}{PREFIX_SEPARATOR}": n.node for n in reversed(nodes)}
    elsewhere: dict[tuple[str, str], str] = {}
    """(node, original) -> the other node whose form its prefixed name would have had."""
    prefixed = {n.node: _own_form(n, spaces, elsewhere) for n in nodes}
    foreign = {
        (n.node, plain): owner
        for n in nodes
        if n.prefix != "always"
        for plain in bare[n.node].values()
        if (owner := _namespace_owner(plain, spaces)) not in (None, n.node)
    }
    """(node, bare name) -> the other node whose `OTHER__` names the bare name has the form of."""
    claims = Counter(
        name
        for n in nodes
        if n.prefix != "always"
        for name in bare[n.node].values()
        if (n.node, name) not in foreign
    )

    kinds: Mapping[str, str] = (
        cast(Mapping[str, str], reserved) if isinstance(reserved, Mapping) else {}
    )
    holders = {name: f"the {kinds.get(name, 'local tool or agent')} {name!r}" for name in reserved}
    """Who holds each name given so far, for a warning about a later tool wanting it."""
    resolved: dict[str, dict[str, str]] = {}
    held_by_never: dict[str, str] = {}
    clashes: dict[tuple[str, str], list[str]] = {}
    """(node, node holding the bare names) -> the `never` node's tools offered prefixed."""
    trespass: dict[tuple[str, str], list[str]] = {}
    """(node, node whose `OTHER__` form they have) -> the tools offered prefixed for it."""
    notes = _Notes(what, warned)
    for n in nodes:
        names: dict[str, str] = {}
        for orig in bare[n.node]:
            plain, long = bare[n.node][orig], prefixed[n.node][orig]
            if n.prefix == "always" or plain in reserved:
                name = long
            elif (owner := foreign.get((n.node, plain))) is not None:
                trespass.setdefault((n.node, owner), []).append(orig)
                name = long
            elif n.prefix == "auto":
                name = long if claims[plain] > 1 else plain
            elif plain in held_by_never:
                clashes.setdefault((n.node, held_by_never[plain]), []).append(orig)
                name = long
            else:
                held_by_never[plain] = n.node
                name = plain
            if name == long and (n.node, orig) in elsewhere:
                notes.elsewhere(n.node, elsewhere[n.node, orig], orig, name)
            else:
                notes.shortened(n.node, orig, name, n.node if name == long else None)
            wanted, salt = name, 0
            while name in holders:
                name = _with_digest(long, f"{n.node}\x00{orig}", salt)
                salt += 1
            if name != wanted:
                notes.taken(n.node, orig, wanted, name, holders[wanted])
            holders[name] = f"{what} {orig!r} of {n.node!r}"
            names[orig] = name
        resolved[n.node] = names
    for (node, holder), tools in clashes.items():
        notes.never_clash(node, holder, tools)
    for (node, owner), tools in trespass.items():
        notes.namespace_clash(node, owner, tools)
    notes.say_shortened()
    notes.say_elsewhere()
    return resolved


def _namespace_owner(name: str, spaces: Mapping[str, str]) -> str | None:
    """The node whose `NODE__` names `name` has the form of (the longest such prefix), if any."""
    space = _space(name, spaces)
    return None if space is None else spaces[space]


def _space(name: str, spaces: Collection[str]) -> str | None:
    """The longest of `spaces` (`NODE__`) that `name` begins with, if any."""
    found: str | None = None
    at = name.find(PREFIX_SEPARATOR)
    while at >= 0:
        if (head := name[: at + len(PREFIX_SEPARATOR)]) in spaces:
            found = head
        at = name.find(PREFIX_SEPARATOR, at + 1)
    return found


def _own_form(
    node: NodeTools, spaces: Mapping[str, str], elsewhere: dict[tuple[str, str], str]
) -> Mapping[str, str]:
    """`node`'s tools' prefixed names, each of `node`'s form, no other's. With servers `a` and
    `a__b`, `a`'s `b__echo` would be `a__b__echo`, of `a__b`'s form (the longest prefix names
    the owner), and `a`'s `_x` would be `a___x`, of server `a_`'s form; such a name is made
    again (`_kept_own`), noted in `elsewhere`. The servers configured decide it, not the ones
    up, nor their order."""
    own = f"{sanitize_name(node.node)}{PREFIX_SEPARATOR}"
    names = _unique(tuple(node.tools), node.node)
    if all(_space(name, spaces) in (None, own) for name in names.values()):
        return names
    names = dict(names)
    for orig, name in names.items():
        if (space := _space(name, spaces)) not in (None, own):
            elsewhere[node.node, orig] = spaces[space]
            names[orig] = _kept_own(own, orig, spaces)
    return names


_SEPARATORS = re.compile(r"_{2,}")


def _kept_own(own: str, orig: str, spaces: Collection[str]) -> str:
    """A name for the tool `orig` of form `own` (`a__`) and of no longer one: `own`, the
    tool's name with no `__` in it nor `_` at its ends, and a hash. A server name so long that
    it must be cut to fit 64 characters gets one with no `__` at all, of no server's form."""
    digest = _digest(f"{own}\x00{orig}")
    tool = _SEPARATORS.sub("_", _valid_characters(orig)).strip("_")
    head = f"{own}{tool}"[: MAX_NAME_LENGTH - _DIGEST_LENGTH - 1].rstrip("_")
    if _space(name := f"{head}_{digest}", spaces) == own:
        return name
    plain = _SEPARATORS.sub("_", own + tool)[: MAX_NAME_LENGTH - _DIGEST_LENGTH - 1]
    return f"{plain.strip('_')}_{digest}"


class _Notes:
    """The warnings of one resolution, each said once (`warned` keeps what was said)."""

    def __init__(self, what: str, warned: set[tuple[str, ...]] | None) -> None:
        self._what = what
        self._warned = warned
        self._shortened: dict[tuple[str, str], list[tuple[str, str]]] = {}
        """(node, why) -> (original, offered) of each name made with a hash suffix."""
        self._elsewhere: dict[tuple[str, str], list[tuple[str, str]]] = {}
        """(node, node whose form) -> (original, offered) of each name kept out of that form."""

    def _first(self, key: tuple[str, ...]) -> bool:
        if self._warned is None:
            return True
        if key in self._warned:
            return False
        self._warned.add(key)
        return True

    def never_clash(self, node: str, holder: str, tools: Sequence[str]) -> None:
        if not self._first(("never", node, holder)):
            return
        many = len(tools) > 1
        logger.warning(
            "server %r: %d %s%s %s with server %r, which also has prefix='never' and keeps "
            "the bare name%s: offering %s as %s (%s)",
            node,
            len(tools),
            self._what,
            "s" if many else "",
            "clash" if many else "clashes",
            holder,
            "s" if many else "",
            "them" if many else "it",
            f"{sanitize_name(node)}{PREFIX_SEPARATOR}NAME",
            _listed(tools, most=3),
        )

    def namespace_clash(self, node: str, owner: str, tools: Sequence[str]) -> None:
        if not self._first(("namespace", node, owner, *sorted(tools))):
            return
        many = len(tools) > 1
        logger.warning(
            "server %r: %d %s%s named %s, the form of server %r's %ss: offering %s as %s (%s)",
            node,
            len(tools),
            self._what,
            "s" if many else "",
            f"{sanitize_name(owner)}{PREFIX_SEPARATOR}NAME",
            owner,
            self._what,
            "them" if many else "it",
            f"{sanitize_name(node)}{PREFIX_SEPARATOR}NAME",
            _listed(tools, most=3),
        )

    def elsewhere(self, node: str, owner: str, orig: str, name: str) -> None:
        """Note `node`'s `orig`, offered as `name`: prefixed, it had `owner`'s form."""
        self._elsewhere.setdefault((node, owner), []).append((orig, name))

    def say_elsewhere(self) -> None:
        for (node, owner), moved in self._elsewhere.items():
            if not self._first(("elsewhere", node, owner, *sorted(orig for orig, _ in moved))):
                continue
            many = len(moved) > 1
            logger.warning(
                "server %r: %d %s%s whose prefixed name%s would have the form of server %r's "
                "%ss (%s): offering %s",
                node,
                len(moved),
                self._what,
                "s" if many else "",
                "s" if many else "",
                owner,
                self._what,
                f"{sanitize_name(owner)}{PREFIX_SEPARATOR}NAME",
                _listed([f"{orig!r} as {name!r}" for orig, name in moved], most=3),
            )

    def taken(self, node: str, orig: str, wanted: str, name: str, holder: str) -> None:
        if self._first(("taken", node, orig, wanted)):
            logger.warning(
                "%s %r of %r would be %r, the name of %s: offering it as %r",
                self._what,
                orig,
                node,
                wanted,
                holder,
                name,
            )

    def shortened(self, node: str, orig: str, name: str, prefix: str | None) -> None:
        """Note `orig` if its `name` had to gain a hash: too long, or alike to another's."""
        head = f"{sanitize_name(prefix)}{PREFIX_SEPARATOR}" if prefix is not None else ""
        natural = head + _valid_characters(orig)
        if name != natural:
            why = "long" if len(natural) > MAX_NAME_LENGTH else "alike"
            self._shortened.setdefault((node, why), []).append((orig, name))

    def say_shortened(self) -> None:
        for (node, why), renamed in self._shortened.items():
            if not self._first((why, node, *sorted(orig for orig, _ in renamed))):
                continue
            count = len(renamed)
            said = (
                f"over {MAX_NAME_LENGTH} characters (with any prefix), shortened"
                if why == "long"
                else "alike to another of its own once made valid for a model (A-Za-z0-9_-), "
                "told apart"
            )
            examples = [f"{orig!r} as {name!r}" for orig, name in renamed]
            logger.warning(
                "server %r: %d %s name%s %s with a hash: %s",
                node,
                count,
                self._what,
                "s" if count > 1 else "",
                said,
                _listed(examples, most=3),
            )


def reserved_clashes(
    nodes: Sequence[NodeTools], reserved: Collection[str]
) -> list[tuple[str, str, str]]:
    """`(node, original, reserved name)` of each tool that would be offered bare (`never`,
    `auto`) under a `reserved` name, and so is offered prefixed (`resolve_tool_names`)."""
    return [
        (n.node, orig, plain)
        for n in nodes
        if n.prefix != "always"
        for orig, plain in _unique(tuple(n.tools), None).items()
        if plain in reserved
    ]


def rule_names(node: str, original: str) -> tuple[str, ...]:
    """The names of `node`'s tool `original` that do not depend on which servers are up: its
    own, and `NODE__ORIGINAL` as written and as `prefix="always"` offers it. A rule (approval
    globs) matched against them and the name offered now covers the tool however it is named.
    """
    plain = _valid_characters(original)
    qualified = f"{sanitize_name(node)}{PREFIX_SEPARATOR}{plain}"
    forms = (original, plain, f"{node}{PREFIX_SEPARATOR}{original}", qualified)
    return tuple(dict.fromkeys((*forms, _fit(qualified, original))))


def invert(names: Mapping[str, str]) -> dict[str, str]:
    """The routing map: model name to original name."""
    return {model: orig for orig, model in names.items()}
