"""The user's home directory, where there is one.

A process may have none: HOME unset and a uid with no entry in the password database
(`docker run --user 4242`, systemd's DynamicUser, some CI runners). Python's `Path.home()`
then raises a bare `RuntimeError`; here it is a `ConfigError` saying why, for the caller to
add what to set instead. A relative HOME (`HOME=`) counts as none: a data directory under it
would move with the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

__all__ = ["expand_user", "home"]


def home() -> Path:
    """The user's home directory. Raises `ConfigError` where there is none."""
    try:
        found = Path.home()
    except RuntimeError:  # no HOME, no passwd entry
        found = None
    if found is None or not found.is_absolute():
        raise ConfigError(f"no home directory: {_why()}")
    return found


def expand_user(path: str | Path) -> Path:
    """`path` with a leading `~` (`~/x`, `~user/x`) expanded. Raises `ConfigError` where the
    home it names is not known."""
    path = Path(path)
    if not str(path).startswith("~"):
        return path
    if str(path) == "~" or str(path).startswith("~" + os.sep):
        return home() / path.relative_to("~")
    try:
        return path.expanduser()
    except RuntimeError:
        raise ConfigError(f"no home directory for {str(path).split(os.sep)[0]!r}") from None


def _why() -> str:
    given = os.environ.get("HOME")
    if given is not None:
        return f"HOME ({given!r}) is not an absolute path"
    uid = os.getuid() if hasattr(os, "getuid") else None
    user = f"user {uid}" if uid is not None else "this user"
    return f"HOME is not set, and {user} has no entry in the password database"
