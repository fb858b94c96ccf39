"""A state cut into chunks (`gateway.durable.chunks`) is read back exactly, whatever JSON it
is (strings that look like references too), and an append-only list adds a few chunks per
element, with a skeleton that stays small however long the list."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue

from gateway.durable.chunks import BIG, BLOCK, MARK, ChunkError, Packer, unpack
from gateway.durable.status import CHECKPOINT_STEP, call_name, journal_name, run_steps

_TEXT = st.text(alphabet=st.sampled_from([MARK, "s", "d", "l", "a", "\\", '"', "é", "\u2028"]))


def _long(head: str, n: int) -> str:
    return head + "x" * n


def _marked(kind: str, tail: str) -> str:
    return MARK + kind + tail


_STRINGS: st.SearchStrategy[str] = st.one_of(
    _TEXT,
    st.builds(_long, _TEXT, st.integers(BIG - 3, BIG + 3)),
    st.builds(_marked, st.sampled_from("sdl" + MARK), _TEXT),
)


def _containers(inner: st.SearchStrategy[JsonValue]) -> st.SearchStrategy[JsonValue]:
    return st.lists(inner, max_size=2 * BLOCK + 3) | st.dictionaries(_STRINGS, inner, max_size=4)


_JSON: st.SearchStrategy[JsonValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _STRINGS,
    _containers,
    max_leaves=150,
)


def _round_trip(value: JsonValue) -> tuple[JsonValue, dict[str, JsonValue]]:
    skeleton, chunks = Packer().pack(value)
    # Through JSON, as the store keeps them.
    stored = json.loads(json.dumps(chunks))
    back = unpack(json.loads(json.dumps(skeleton)), stored)
    assert back == value
    assert json.dumps(back) == json.dumps(value)  # keys in their order, types kept
    return skeleton, chunks


@settings(max_examples=200, deadline=None)
@given(_JSON)
def test_any_json_is_read_back_exactly(value: JsonValue) -> None:
    _round_trip(value)


@pytest.mark.parametrize(
    "value",
    [
        MARK,
        MARK + MARK,
        MARK + "s" + "0" * 32,
        MARK + "l0123",
        [MARK + "l" + "0" * 32, MARK + "d" + "0" * 32],
        {MARK + "d": MARK + "x"},
        ["y" * BIG, "y" * BIG, MARK + "y" * BIG],
        [{"observation": "z" * 5000, "n": i} for i in range(BLOCK * BLOCK + 5)],
        [[i] * 40 for i in range(3 * BLOCK)],
        {"steps": {"0": [{"tool": "calc", "pad": "p" * 200, "i": i} for i in range(70)]}},
        [{"small": i} for i in range(100)],
        [{"big int": 2**80, "s": MARK + "q" * 300}],
    ],
)
def test_cases_are_read_back_exactly(value: JsonValue) -> None:
    _round_trip(value)


def test_a_string_of_the_data_that_starts_with_the_mark_is_never_a_reference() -> None:
    skeleton, chunks = _round_trip({"s": MARK + "s" + "0" * 32})
    assert chunks == {}
    assert skeleton == {"s": MARK + MARK + "s" + "0" * 32}


def _steps(n: int, *, big: bool = True) -> dict[str, Any]:
    return {
        "run_id": "r1",
        "steps": [
            {
                "tool_call_id": f"call_{i}",
                "observation": f"{i}" * (1500 if big else 1),
                "pad": "p" * 200,
            }
            for i in range(n)
        ],
    }


@pytest.mark.parametrize(
    ("steps", "big"),
    [(range(1, 3 * BLOCK), True), (range(BLOCK * BLOCK - 3, BLOCK * BLOCK + BLOCK + 3), False)],
)
def test_each_appended_step_adds_a_few_chunks_and_the_skeleton_stays_small(
    steps: range, big: bool
) -> None:
    packer = Packer()
    written = set(packer.pack(_steps(steps[0] - 1, big=big))[1])
    added: list[int] = []
    for n in steps:
        skeleton, chunks = packer.pack(_steps(n, big=big))
        new = chunks.keys() - written
        written |= new
        added.append(len(new))
        # At most a block of steps and a block of blocks, by reference (~36 B each).
        assert len(json.dumps(skeleton)) < 2 * BLOCK * 45 + 100
    # The step and its observation; a full block (or a block of blocks too) now and then.
    assert max(added) <= (4 if big else 3)
    assert sum(added) <= (2 if big else 1) * len(added) + len(added) // BLOCK + 2


def test_the_same_value_is_the_same_chunks_in_another_packer() -> None:
    value = _steps(BLOCK + 3)
    assert Packer().pack(value) == Packer().pack(json.loads(json.dumps(value)))


@pytest.mark.parametrize(
    ("skeleton", "chunks", "message"),
    [
        ({"a": MARK + "d" + "f" * 32}, {}, "chunk f{32} is missing"),
        ([MARK + "l" + "e" * 32], {"e" * 32: "not a list"}, "holds no list"),
        ({"a": MARK + "l" + "e" * 32}, {"e" * 32: []}, "outside a list"),
        (MARK + "q123", {}, "is no reference"),
        (MARK, {}, "is no reference"),
    ],
)
def test_a_broken_skeleton_is_a_clear_error(
    skeleton: JsonValue, chunks: dict[str, JsonValue], message: str
) -> None:
    with pytest.raises(ChunkError, match=message):
        unpack(skeleton, chunks)


@pytest.mark.parametrize(
    "call", [CHECKPOINT_STEP, MARK, MARK + MARK + "x", "tool 0 c1", "c1/model x #1"]
)
def test_no_call_is_recorded_under_the_checkpoints_name(call: str) -> None:
    stored = journal_name(call)
    assert stored != CHECKPOINT_STEP
    assert call_name(stored) == call
    [step] = run_steps(
        [
            {
                "function_id": 1,
                "function_name": name,
                "output": None,
                "error": None,
                "started_at_epoch_ms": 1,
                "completed_at_epoch_ms": 2,
            }
            for name in (stored, CHECKPOINT_STEP)
        ]
    )
    assert step.name == call
