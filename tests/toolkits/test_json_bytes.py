"""JSON for the wire: written as the standard library writes it, compact, whatever orjson
refuses included; read to the standard library's values and errors, whatever jiter refuses
included, but for nesting deeper than jiter reads (`TooDeep`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolkits import json_bytes, read_json
from toolkits.nesting import TooDeep


def test_compact_utf8_as_the_standard_library_writes_it() -> None:
    value: dict[str, object] = {
        "text": 'é ü \u2028 "quoted"',
        "items": [1, 2.5, None, True],
        "nested": {"a": []},
    }
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert json_bytes(value) == expected


def test_what_orjson_refuses_is_written_all_the_same() -> None:
    big = {"n": 10**30, 7: "a key that is not a string"}
    assert (
        json_bytes(big) == b'{"n":1000000000000000000000000000000,"7":"a key that is not a string"}'
    )


def test_a_lone_surrogate_is_written_as_the_escape_it_was_read_from() -> None:
    # JSON a JavaScript server sends when it cuts a string in the middle of an emoji.
    sent = b'{"text":"bad\\ud800x \xc3\xa9","\\udc00":"\\\\\\ud800"}'
    value = read_json(sent)
    assert value == {"text": "bad\ud800x \u00e9", "\udc00": "\\\ud800"}
    assert json_bytes(value) == sent
    assert read_json(json_bytes(value)) == value


_READ_ALIKE = [
    '{"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"text","text":"é ✓ 😀"}]}}',
    '"\\ud83d\\ude00 \\u00e9 \\" \\\\ \\/ \\b\\f\\n\\r\\t"',
    "[1, -0, 0.1, 1.5e+3, 1E2, 1e-400, 1e400, -1e400, 12345678901234567890.5]",
    "[123456789012345678901234567890, 9223372036854775808, -9223372036854775809]",
    "1" * 4300,  # the most digits Python reads
    '{"a": 1, "a": 2}',  # the last one wins
    "  null \n",
    "[NaN, Infinity, -Infinity]",  # Python's, not JSON's: read unless refused
    # What jiter refuses and `json` reads: read by `json`.
    '"\\ud800"',
    '{"\\udc00\\ud800": 1}',
    "\ufeff{}",
    # Not JSON: the same error.
    '"a\nb"',
    '"a\x01b"',
    "01",
    "1.",
    "+1",
    "[1,]",
    '{"a":1,}',
    "'x'",
    "True",
    "[1 2]",
    "",
    '{"a":1} x',
    "1" * 4301,
]


def _outcome(read: Any, data: bytes | str) -> tuple[str, str]:
    """The value read as `repr` writes it (nan != nan), or the error's type."""
    try:
        return "value", repr(read(data))
    except (ValueError, RecursionError) as exc:
        return "error", type(exc).__name__


@pytest.mark.parametrize("text", _READ_ALIKE, ids=lambda text: repr(text[:24]))
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_read_as_the_standard_library_reads_it(text: str, as_bytes: bool) -> None:
    data = text.encode("utf-8", "surrogatepass") if as_bytes else text
    assert _outcome(read_json, data) == _outcome(json.loads, data)


@pytest.mark.parametrize("levels", [201, 300, 5000])
def test_nesting_beyond_what_jiter_reads_is_refused_as_too_deep(levels: int) -> None:
    # `json` would read 300 levels, and raise a RecursionError for 5,000.
    with pytest.raises(TooDeep, match=f"nested too deeply \\({levels} levels; at most 100\\)"):
        read_json("[" * levels + "1" + "]" * levels)


def test_bytes_that_are_not_utf8_are_refused_as_by_the_standard_library() -> None:
    with pytest.raises(UnicodeDecodeError):
        read_json(b'"\xff"')


@pytest.mark.parametrize("text", ["NaN", "[1, Infinity]", '{"a": -Infinity}'])
def test_constants_refused_when_asked(text: str) -> None:
    with pytest.raises(ValueError, match="is not JSON"):
        read_json(text, constants=False)
    assert read_json("[1e400]", constants=False) == [float("inf")]  # a number, not a constant
