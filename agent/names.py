"""Telling someone (a model, a person) which names exist when they used one that does not:
the closest few, and a list short enough to read whatever the number of names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = ["SHOWN_NAMES", "closest_names", "did_you_mean", "listed_names"]

SHOWN_NAMES = 50
"""The most names `listed_names` shows: a model told 8,000 tool names pays ~150 KB per
mistaken call, and learns no more from them than from the closest few."""

_CUTOFF = 0.6  # difflib's own default: close enough to be the name meant
_BEHIND_THE_BEST = 0.2


def closest_names(name: str, known: Iterable[str], most: int = 3) -> list[str]:
    """The known names most like `name`, best first (at most `most`). A namespaced name
    (`SERVER__TOOL`) is also compared by its own part, so `echo` finds `crm__echo` and
    `crm__serch` finds `search`."""
    own = _own_part(name)
    whole, part = difflib.SequenceMatcher(), difflib.SequenceMatcher()
    whole.set_seq2(name)  # the matcher caches what it knows of its second sequence
    part.set_seq2(own)
    scored: list[tuple[float, str]] = []
    for candidate in dict.fromkeys(known):
        score = _score(whole, candidate)
        if own != name or _own_part(candidate) != candidate:
            score = max(score, _score(part, _own_part(candidate)))
        if score >= _CUTOFF:
            scored.append((score, candidate))
    scored.sort(key=lambda pair: -pair[0])  # stable: equals keep their given order
    # Far behind the best, a name is noise (`echo` is 0.6 like `search`, 1.0 like `crm__echo`).
    floor = scored[0][0] - _BEHIND_THE_BEST if scored else 0.0
    return [candidate for score, candidate in scored[:most] if score >= floor]


def did_you_mean(name: str, known: Iterable[str], most: int = 3) -> str:
    """`; did you mean 'a' or 'b'?` for the names closest to `name` ("" if none is)."""
    close = closest_names(name, known, most)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def listed_names(names: Sequence[str], most: int = SHOWN_NAMES) -> str:
    """`a, b, c` or, past `most` names, `a, b and 48 more`; `none` for no names."""
    if not names:
        return "none"
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def _own_part(name: str) -> str:
    return name.rpartition("__")[2] or name


def _score(matcher: difflib.SequenceMatcher[str], candidate: str) -> float:
    """`candidate`'s likeness to the matcher's name, with difflib's cheap bounds first (most
    of thousands of names fail them)."""
    matcher.set_seq1(candidate)
    if matcher.real_quick_ratio() < _CUTOFF or matcher.quick_ratio() < _CUTOFF:
        return 0.0
    return matcher.ratio()
