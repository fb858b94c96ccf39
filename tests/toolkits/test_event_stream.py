"""Server-sent events' data from a body's pieces: where lines and events end, whatever the
pieces' bounds, and the limit on an event's size."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkits.mcp.event_stream import AnswerTooLarge, EventData

STREAM = (
    b"event: message\r\n"
    b'data: {"jsonrpc":"2.0","method":"notifications/progress"}\r\n\r\n'
    b": a comment\n"
    b"id: 7\n"
    b"data:first\n"
    b"data:  second, its second space kept\r"
    b"\r"
    b"retry: 10\n\n"  # an event without data: nothing
    b"data: \xe2\x80\xa8 ends no line\n\n"
    b"data: never ended"
)
EVENTS = [
    b'{"jsonrpc":"2.0","method":"notifications/progress"}',
    b"first\n second, its second space kept",
    b"\xe2\x80\xa8 ends no line",
]


def _read(pieces: list[bytes], limit: int = 1_000) -> list[bytes]:
    events = EventData(limit)
    return [data for piece in pieces for data in events.feed(piece)]


def test_events_in_one_piece() -> None:
    assert _read([STREAM]) == EVENTS


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16])
def test_events_whatever_the_pieces(size: int) -> None:
    pieces = [STREAM[at : at + size] for at in range(0, len(STREAM), size)]
    assert _read(pieces) == EVENTS


def test_an_event_is_returned_by_the_piece_that_ends_it() -> None:
    events = EventData(1_000)
    assert events.feed(b"data: 1\r") == []
    assert events.feed(b"\n") == []  # the LF of the CRLF above: no line of its own
    assert events.feed(b"\r") == [b"1"]
    assert events.feed(b"\ndata: 2\n") == []  # the LF of "\r\n" again, then a data line
    assert events.feed(b"\n") == [b"2"]


@pytest.mark.parametrize(
    "pieces",
    [
        [b"data: " + b"x" * 101 + b"\n\n"],  # one line
        [b"data: " + b"x" * 60 + b"\n", b"data: " + b"x" * 60 + b"\n\n"],  # two lines
        [b"data: " + b"x" * 50] * 3,  # a line that never ends: refused before it does
    ],
    ids=["one line", "two lines", "unended"],
)
def test_an_event_past_the_limit_is_refused(pieces: list[bytes]) -> None:
    with pytest.raises(AnswerTooLarge, match="larger than the 100 byte limit"):
        _read(pieces, limit=100)


def test_an_event_at_the_limit_is_read() -> None:
    assert _read([b"data: " + b"x" * 100 + b"\n\n"], limit=100) == [b"x" * 100]


def _by_lines(stream: bytes) -> list[bytes]:
    """The events of a whole stream, read the plain way: `splitlines` (LF, CRLF, CR)."""
    events: list[bytes] = []
    data: list[bytes] = []
    for line in stream.splitlines():
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
        elif not line and data:
            events.append(b"\n".join(data))
            data = []
    return events


# Pieces of 4 kB or more are cut into lines by `find`, shorter ones by `splitlines`.
_LONG = b"z" * 5_000
_PARTS = st.sampled_from(
    [b"data:", b"data: ", b"data:  ", b"\r", b"\n", b"\r\n", b"x", b": c", b"id: 1", _LONG]
)


@settings(max_examples=2_000, deadline=None)
@given(
    stream=st.lists(_PARTS, max_size=40).map(b"".join),
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=8),
)
def test_any_stream_cut_anywhere_reads_as_its_lines_say(stream: bytes, cuts: list[int]) -> None:
    bounds = sorted({0, len(stream), *(cut for cut in cuts if cut < len(stream))})
    pieces = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    complete = stream[: max(stream.rfind(b"\n"), stream.rfind(b"\r")) + 1]  # a last line unended
    assert _read(pieces, limit=1_000_000) == _by_lines(complete)
