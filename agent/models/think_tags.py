"""Reasoning written in the answer's text, as `<think>...</think>` before the answer.

DeepSeek-R1 and Qwen3 do so on servers that do not split it out (llama.cpp with
`--reasoning-format none`, older Ollama and LM Studio, vLLM without a reasoning parser). Only a
leading block counts: a `<think>` further on is part of what the model says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ThinkFilter", "split_think", "think_text"]

_OPEN = "<think>"
_CLOSE = "</think>"


def split_think(content: str) -> tuple[str, str]:
    """`(block, answer)`: the leading think block as written (with the whitespace around it),
    and the text after it; `("", content)` when the content does not start with one. A block
    never closed (the answer was cut at the token limit) is all reasoning."""
    stripped = content.lstrip()
    if not stripped.startswith(_OPEN):
        return "", content
    end = stripped.find(_CLOSE)
    if end < 0:
        return content, ""
    answer = stripped[end + len(_CLOSE) :].lstrip()
    return content[: len(content) - len(answer)], answer


def think_text(block: str) -> str:
    """The reasoning inside a block `split_think` returned."""
    return block.strip().removeprefix(_OPEN).removesuffix(_CLOSE).strip()


@dataclass(slots=True)
class ThinkFilter:
    """Passes on streamed text without its leading think block, as `split_think` would cut
    it from the whole: a tag split across deltas is held until it is known."""

    _state: Literal["start", "think", "after", "answer"] = "start"
    _held: str = ""

    def feed(self, delta: str) -> str:
        if self._state == "answer":
            return delta
        self._held += delta
        if self._state == "start":
            head = self._held.lstrip()
            if not head or _OPEN.startswith(head):
                return ""  # nothing but whitespace yet, or perhaps the start of the tag
            if not head.startswith(_OPEN):
                self._state = "answer"
                out, self._held = self._held, ""
                return out
            self._state = "think"
        if self._state == "think":
            end = self._held.find(_CLOSE)
            if end < 0:
                return ""
            self._state = "after"
            self._held = self._held[end + len(_CLOSE) :]
        answer = self._held.lstrip()  # the blank lines between the block and the answer
        if not answer:
            self._held = ""
            return ""
        self._state = "answer"
        self._held = ""
        return answer
