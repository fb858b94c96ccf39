"""Turning stored rows back into turns: shared by the SQL stores."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..errors import MemoryStoreError
from ..messages import ChatMessage
from .base import StoredTurn

MESSAGE: TypeAdapter[ChatMessage] = TypeAdapter(ChatMessage)


def message_json(message: ChatMessage) -> str:
    return MESSAGE.dump_json(message).decode()


def turns_from_rows(rows: Iterable[tuple[Any, ...]]) -> list[StoredTurn]:
    """Rows of `(seq, key, created_at, message_json, tokens)`, ordered by seq then position."""
    turns: list[StoredTurn] = []
    for seq, key, created_at, message, tokens in rows:
        try:
            parsed = (
                MESSAGE.validate_json(message)
                if isinstance(message, str | bytes)
                else MESSAGE.validate_python(message)
            )
        except ValidationError as exc:
            raise MemoryStoreError(f"a stored message of turn {seq} is unreadable: {exc}") from exc
        if not turns or turns[-1].seq != seq:
            turns.append(
                StoredTurn(seq=seq, key=key, messages=[], tokens=[], created_at=created_at)
            )
        turns[-1].messages.append(parsed)
        turns[-1].tokens.append(int(tokens))
    return turns
