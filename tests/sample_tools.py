"""Functions that tests load as configured tools (`python = "tests.sample_tools:NAME"`)."""

from __future__ import annotations


def shout(text: str, times: int = 1) -> str:
    """Repeat a text in capitals."""
    return " ".join([text.upper()] * times)
