"""A server's stderr as lines, and what of it is quoted when it fails to start."""

from __future__ import annotations

from toolkits.mcp.stderr_tail import StderrLines, StderrTail


def test_the_last_lines_are_kept_in_order() -> None:
    tail = StderrTail(last=3)
    assert not tail
    for n in range(6):
        tail.append(f"line {n}")
    assert str(tail) == "line 3 | line 4 | line 5"


def test_an_older_error_stays_before_the_chatter_that_followed_it() -> None:
    tail = StderrTail(last=2, errors=2)
    for line in [
        "Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'mcp_srv'",
        "shutting down",
        "bye",
        "really",
    ]:
        tail.append(line)
    assert tail.lines() == [
        "Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'mcp_srv'",
        "...",
        "bye",
        "really",
    ]


def test_npm_notices_and_warnings_are_left_out_but_its_errors_are_not() -> None:
    tail = StderrTail()
    for line in ["npm notice", "npm WARN deprecated x", "npm warn exec y", "npm error 404 z"]:
        tail.append(line)
    assert tail.lines() == ["npm error 404 z"]


def test_stderr_lines_end_in_newline_only() -> None:
    lines = StderrLines(limit=20)
    said = [
        *lines.feed(b"one\ntw"),
        *lines.feed(b"o\r\nbar 10%\rbar 50%\r"),
        *lines.feed(b"\n"),
        *lines.feed(b"last"),
    ]
    # A `\r` is shown, not obeyed: what it would overwrite stays in the line.
    assert said == [b"one", b"two\r", b"bar 10%\rbar 50%\r"]
    assert lines.finish() == b"last"
    assert lines.finish() == b""


def test_stderr_lines_keep_the_first_bytes_of_a_long_line_and_drop_the_rest() -> None:
    lines = StderrLines(limit=10)
    said = [*lines.feed(b"0123456789abc"), *lines.feed(b"def" * 1000), *lines.feed(b"\nnext\n")]
    assert said == [b"0123456789", b"next"]
    # A line that never ends holds `limit` bytes, however much of it comes.
    for _ in range(1000):
        assert lines.feed(b"x" * 5000 + b"\r") == []
        assert len(lines._pending) <= 10  # pyright: ignore[reportPrivateUsage]
    assert lines.finish() == b"x" * 10
