"""What of a server's stderr is quoted when it fails to start."""

from __future__ import annotations

from toolkits.mcp.stderr_tail import StderrTail


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
