"""JSON bytes for the wire: as the standard library writes them, compact, whatever orjson
refuses included."""

from __future__ import annotations

import json

from toolkits import json_bytes


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
