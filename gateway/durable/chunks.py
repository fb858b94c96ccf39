"""A run's state as a small skeleton and content-addressed chunks.

A checkpoint that wrote the whole state after every step would write every earlier step
again: a run's store would grow with the square of its steps. So the state's JSON is cut
into chunks, each named by a hash of its content and written once, and a skeleton that names
them; what a step adds is a few new chunks and a skeleton that stays small however long the
run (`checkpoints` writes them).

What becomes a chunk, decided by the value alone (the same content is the same chunk in any
checkpoint, any process):

- a string of `BIG` characters or more (a tool's result, say);
- a dict that is an element of a list (a step, a message) and whose JSON is `SMALL` bytes or
  more; one under `BIG` bytes is kept whole (nothing in it is cut: its JSON tells, written
  in C, where walking it would cost more than the rest of the checkpoint);
- in a list longer than `BLOCK`, each full block of `BLOCK` elements from its start, and so
  on up (blocks of blocks): an append-only list keeps its earlier blocks, and its skeleton
  names at most about `2 * BLOCK` of them.

In its place the skeleton (or the chunk holding it) has a reference: a string of `MARK`, the
chunk's kind (`s`tring, `d`ict, `l`ist block) and its hash. A string of the data that starts
with `MARK` is kept with one more `MARK` in front, so no data is ever read as a reference. A
list block's reference stands for its elements, in the list that holds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import cast

from pydantic import JsonValue

from toolkits.json_bytes import json_bytes

__all__ = ["BIG", "BLOCK", "MARK", "SMALL", "ChunkError", "Packer", "unpack"]

MARK = "\x1e"
"""Starts a reference: ASCII's record separator, a control character no text starts with but
on purpose, which any database's text can hold (JSON writes it as an escape)."""
BIG = 1024
SMALL = 128
BLOCK = 32
_KINDS: dict[str, type] = {"s": str, "d": dict, "l": list}
"""The kinds of chunks, and what each holds."""


class ChunkError(ValueError):
    """A reference names no chunk there is, or one of another kind (a store that lost part
    of a run, or was written by hand)."""


_MARK_JSON = b"\\u001e"
"""`MARK` in JSON as `json_bytes` writes it (orjson and `json` both escape it so)."""


def _digest(kind: str, data: bytes) -> str:
    return hashlib.blake2b(kind.encode() + data, digest_size=16).hexdigest()


class Packer:
    """Cuts JSON values into a skeleton and chunks (`pack`); remembers the references of the
    long strings of the last value it packed, by identity, so the next checkpoint (which
    shares them: pydantic dumps a model's strings as they are) does not hash them again."""

    def __init__(self) -> None:
        self._strings: dict[int, tuple[str, str]] = {}
        self._seen: dict[int, tuple[str, str]] = {}
        self._chunks: dict[str, JsonValue] = {}

    def pack(self, value: JsonValue) -> tuple[JsonValue, dict[str, JsonValue]]:
        """The skeleton of `value`, and every chunk it names (nested ones too), by hash."""
        self._chunks = {}
        self._seen = {}
        try:
            skeleton = self._value(value, in_list=False)
            return skeleton, self._chunks
        finally:
            self._strings, self._seen = self._seen, {}
            self._chunks = {}

    def _chunk(self, kind: str, content: JsonValue, data: bytes) -> str:
        digest = _digest(kind, data)
        self._chunks[digest] = content
        return MARK + kind + digest

    def _value(self, value: JsonValue, *, in_list: bool) -> JsonValue:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, dict):
            if not in_list:
                return {k: self._value(v, in_list=False) for k, v in value.items()}
            data = json_bytes(value)  # in C: most elements (a step, a message) are small
            if len(data) < BIG and _MARK_JSON not in data:
                return self._chunk("d", value, data) if len(data) >= SMALL else value
            packed: dict[str, JsonValue] = {
                k: self._value(v, in_list=False) for k, v in value.items()
            }
            data = json_bytes(packed)
            return self._chunk("d", packed, data) if len(data) >= SMALL else packed
        if isinstance(value, list):
            return self._blocks([self._value(v, in_list=True) for v in value])
        return value

    def _string(self, value: str) -> str:
        if len(value) >= BIG:
            known = self._strings.get(id(value))
            if known is not None and known[0] is value:
                ref = known[1]
                self._chunks[ref[2:]] = value
            else:
                ref = self._chunk("s", value, value.encode("utf-8", "surrogatepass"))
            self._seen[id(value)] = (value, ref)
            return ref
        return MARK + value if value.startswith(MARK) else value

    def _blocks(self, elements: list[JsonValue]) -> list[JsonValue]:
        if len(elements) <= BLOCK:
            return elements
        full = len(elements) - len(elements) % BLOCK
        blocks: list[JsonValue] = []
        for start in range(0, full, BLOCK):
            block = elements[start : start + BLOCK]
            blocks.append(self._chunk("l", block, json_bytes(block)))
        return self._blocks(blocks) + elements[full:]


def unpack(skeleton: JsonValue, chunks: Mapping[str, JsonValue]) -> JsonValue:
    """The value `Packer.pack` cut into `skeleton` and `chunks`; `ChunkError` if one of
    those it names is not in `chunks`."""
    return _unpack(skeleton, chunks)


def _unpack(value: JsonValue, chunks: Mapping[str, JsonValue]) -> JsonValue:
    if isinstance(value, str):
        if not value.startswith(MARK):
            return value
        kind, content = _reference(value, chunks)
        if kind == "d":
            return _unpack(content, chunks)
        if kind == "l":
            raise ChunkError(f"list block {value[2:]} is outside a list")
        return content  # a string, kept as it was
    if isinstance(value, dict):
        return {k: _unpack(v, chunks) for k, v in value.items()}
    if isinstance(value, list):
        out: list[JsonValue] = []
        for element in value:
            if isinstance(element, str) and element.startswith(MARK + "l"):
                _, block = _reference(element, chunks)
                out.extend(cast(list[JsonValue], _unpack(block, chunks)))
            else:
                out.append(_unpack(element, chunks))
        return out
    return value


def _reference(value: str, chunks: Mapping[str, JsonValue]) -> tuple[str, JsonValue]:
    """The kind of the reference `value` and its chunk's content; kind "" and the string
    itself for a string of the data kept with one more `MARK`."""
    kind = value[1:2]
    if kind == MARK:
        return "", value[1:]
    holds = _KINDS.get(kind)
    if holds is None:
        raise ChunkError(f"{value[:40]!r} is no reference")
    digest = value[2:]
    try:
        content = chunks[digest]
    except KeyError:
        raise ChunkError(f"chunk {digest} is missing") from None
    if not isinstance(content, holds):
        raise ChunkError(f"chunk {digest} holds no {holds.__name__}, as its reference says")
    return kind, content
