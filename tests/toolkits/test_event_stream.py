"""Server-sent events' data from a body's pieces: where lines and events end, whatever the
pieces' bounds, the limit on an event's size, which events are messages (`message` ones), and
the `id` and `retry` a closed stream is resumed by."""

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


def test_only_message_events_are_messages() -> None:
    stream = (
        b"event: ping\ndata: ping\n\n"
        b"event: heartbeat\ndata: 1\n\n"
        b"event:message\ndata: 2\n\n"
        b"event:\ndata: 3\n\n"
        b"event\ndata: 4\n\n"
        b"event: message\nevent: other\ndata: 5\n\n"
        b"event: other\nevent: message\ndata: 6\n\n"
        b"data: 7\n\n"  # a type holds for its event alone
    )
    assert _read([stream]) == [b"2", b"3", b"4", b"6", b"7"]


def test_the_last_id_is_that_of_the_last_event_ended() -> None:
    events = EventData(1_000)
    assert (events.last_id, events.retry) == (None, None)
    events.feed(b"id: a\nretry: 250\ndata: \n\n")  # a priming event: its id, no message
    assert (events.last_id, events.retry) == ("a", 250)
    events.feed(b"data: 1\n\n")  # an id holds for the events after it
    assert events.last_id == "a"
    events.feed(b"event: ping\nid: b\ndata: ping\n\n")  # whatever the event's type
    assert events.last_id == "b"
    events.feed(b"id: c\ndata: 2\n")  # an event not ended: its data was not read
    assert events.last_id == "b"
    events.feed(b"\nid\n\nid: d\x00\n\nretry: soon\n\n")
    # An empty id leaves the last (as the SDK client reads it); one with a NUL is ignored, as
    # is a retry not in digits.
    assert (events.last_id, events.retry) == ("c", 250)


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
    """The `message` events of a whole stream, read the plain way: `splitlines` (LF, CRLF,
    CR), each line a field and its value."""
    events: list[bytes] = []
    data: list[bytes] = []
    kind = b""
    for line in stream.splitlines():
        name, _, value = line.partition(b":")
        value = value[1:] if value.startswith(b" ") else value
        if not line:
            if data and kind in (b"", b"message"):
                events.append(b"\n".join(data))
            data, kind = [], b""
        elif name == b"data":
            data.append(value)
        elif name == b"event":
            kind = value
    return events


# Pieces of 4 kB or more are cut into lines by `find`, shorter ones by `splitlines`.
_LONG = b"z" * 5_000
_PARTS = st.sampled_from(
    [
        *(b"data:", b"data: ", b"data:  ", b"\r", b"\n", b"\r\n", b"x", b": c", b"id: 1"),
        *(b"event: ping", b"event: message", b"event:", b"message", _LONG),
    ]
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
