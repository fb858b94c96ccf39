"""Which package shadows ours, when `agent`, `toolkits` or `gateway` is not agent-gateway's.

The wheel installs its packages under those generic import names, and PyPI has other packages
of two of them (`toolkits`, `agent`): pip lets one overwrite the other's files without a word,
and uninstalling it then deletes ours. What breaks is an import; `shadowing` names the cause in
one line. It is asked only after an import failed: a good start pays nothing for it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit
from urllib.request import url2pathname

__all__ = ["NAMES", "REINSTALL", "reinstall", "shadowing"]

NAMES = ("agent", "toolkits", "gateway")
"""Our import names that other distributions may hold too."""

REINSTALL = "pip install --force-reinstall --no-deps agent-gateway"
"""How to put ours back when nothing says what was installed: from an index (PyPI has no
agent-gateway: a wheel or a checkout has its `direct_url.json`, `reinstall`)."""


def shadowing() -> str | None:
    """What shadows one of our packages, if anything does (an import that failed then failed
    for that: another package's `__init__.py` in ours may fail on imports of its own)."""
    home = Path(__file__).parent.parent  # where this installation put all four packages
    for name in NAMES:
        said = _shadowed(name, home / name / "__init__.py", home)
        if said is not None:
            return said
    return None


def reinstall(home: Path) -> str:
    """The command that installs again what was installed in `home` (the folder holding our
    packages), as its distribution's `direct_url.json` (PEP 610) says: the wheel file, the
    checkout (`pip install -e` for an editable one), the VCS URL; else `REINSTALL`."""
    for dist in importlib.metadata.distributions(name="agent-gateway"):
        direct = _direct_url(dist)
        url = direct.get("url")
        if not isinstance(url, str):
            continue
        place = _file_path(url)
        installed_here = _same(Path(str(dist.locate_file(""))), home)
        if not installed_here and (place is None or not _same(place, home)):
            continue  # another installation's (an editable one elsewhere on the path)
        dir_info = direct.get("dir_info")
        if isinstance(dir_info, dict) and place is not None:
            if cast(dict[str, Any], dir_info).get("editable") is True:
                return f"pip install -e {shlex.quote(str(place))}"
            return f"pip install --force-reinstall --no-deps {shlex.quote(str(place))}"
        vcs_info = direct.get("vcs_info")
        if isinstance(vcs_info, dict):
            vcs = cast(dict[str, Any], vcs_info)
            commit = vcs.get("commit_id")
            at = f"@{commit}" if isinstance(commit, str) else ""
            url = f"{vcs.get('vcs', 'git')}+{url}{at}"
        target = str(place) if place is not None else url
        return f"pip install --force-reinstall --no-deps {shlex.quote(target)}"
    return REINSTALL


def _direct_url(dist: importlib.metadata.Distribution) -> dict[str, Any]:
    try:
        read: object = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return {}
    return cast(dict[str, Any], read) if isinstance(read, dict) else {}


def _file_path(url: str) -> Path | None:
    """The local path of a `file:` URL; None for any other."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(url2pathname(parts.path))  # it unquotes (%20)


def _shadowed(name: str, ours: Path, home: Path) -> str | None:
    spec = importlib.util.find_spec(name)
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None or not origin.is_file():
        if not ours.is_file():  # a folder of ours without it is a namespace package
            return (
                f"agent-gateway's package {name!r} has lost its {name}/__init__.py (uninstalling "
                f"another package named {name!r} deletes it): reinstall it, {reinstall(home)}"
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
        f"agent-gateway's {ours.parent}: pip uninstall {others[0]}, then {reinstall(home)} (or keep "
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
