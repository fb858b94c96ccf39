"""Which package shadows ours, when `agent`, `toolkits` or `gateway` is not agent-gateway's.

The wheel installs its packages under those generic import names, and PyPI has other packages
of two of them (`toolkits`, `agent`): pip lets one overwrite the other's files without a word,
and uninstalling it then deletes ours. What breaks is an import; `shadowing` names the cause in
one line. It is asked only after an import failed: a good start pays nothing for it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path

__all__ = ["NAMES", "shadowing"]

NAMES = ("agent", "toolkits", "gateway")
"""Our import names that other distributions may hold too."""

REINSTALL = "pip install --force-reinstall --no-deps agent-gateway"


def shadowing() -> str | None:
    """What shadows one of our packages, if anything does (an import that failed then failed
    for that: another package's `__init__.py` in ours may fail on imports of its own)."""
    home = Path(__file__).parent.parent  # where this installation put all four packages
    for name in NAMES:
        said = _shadowed(name, home / name / "__init__.py")
        if said is not None:
            return said
    return None


def _shadowed(name: str, ours: Path) -> str | None:
    spec = importlib.util.find_spec(name)
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None or not origin.is_file():
        if not ours.is_file():  # a folder of ours without it is a namespace package
            return (
                f"agent-gateway's package {name!r} has lost its {name}/__init__.py (uninstalling "
                f"another package named {name!r} deletes it): reinstall it, {REINSTALL}"
            )
        return None
    if not ours.is_file() or not os.path.samefile(origin, ours):
        owner = _owner(origin)
        held = f" (the package {owner})" if owner else ""
        return (
            f"{name!r} is imported from {origin.parent}{held}, not from agent-gateway's "
            f"{ours.parent}: it comes first on the Python path (PYTHONPATH, or the working "
            "directory of `python -m`)"
        )
    holders = importlib.metadata.packages_distributions().get(name, [])
    others = [dist for dist in dict.fromkeys(holders) if _canonical(dist) != "agent-gateway"]
    if not others:
        return None
    named = " and ".join(f"{dist} {_version(dist)}" for dist in others)
    return (
        f"the package {named} also has the import name {name!r}, and its files replaced "
        f"agent-gateway's {ours.parent}: pip uninstall {others[0]}, then {REINSTALL} (or keep "
        "agent-gateway in a venv of its own: pipx, uv tool install)"
    )


def _owner(path: Path) -> str | None:
    """`name version` of the distribution whose files hold `path`, if one does."""
    for dist in importlib.metadata.distributions():
        for file in dist.files or []:
            if file.name == path.name and _same(Path(str(dist.locate_file(file))), path):
                return f"{dist.metadata['Name']} {dist.version}"
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
