"""What the packages import is what the wheel declares: each distribution our code imports is a
dependency (or its extra's, where that extra's feature lives), and a dependency's private
modules are used only where the dependency is pinned to one release series."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "toolkits", "gateway", "agent_gateway")

OPTIONAL = {
    "opentelemetry-sdk": ("otel", {"gateway/otel_batch.py", "gateway/otel_export.py"}),
    "redis": ("redis", {"agent/memory/redis_store.py"}),
    "keyring": ("keyring", {"toolkits/mcp/oauth_store.py"}),
}
"""A distribution of an extra: the extra, and the modules that import it (each says which
extra to install when it is missing)."""

PINNED_SERIES = {"mcp", "dbos"}
"""Dependencies held to one minor series (`<X.Y`), whose private modules we may use."""


def imports() -> Iterator[tuple[str, str]]:
    """(file, module) for each absolute import of another package in our packages; of
    `from X import Y`, `X.Y` (`Y` may be a module: `from opentelemetry import trace`)."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [f"{node.module}.{alias.name}" for alias in node.names]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    if top not in PACKAGES and top not in sys.stdlib_module_names:
                        yield where, name


def module_owners() -> dict[str, set[str]]:
    """Each installed module (`opentelemetry.sdk.trace`) and the distributions whose files
    hold it (namespace packages such as `opentelemetry` are held by several)."""
    owners: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        for file in dist.files or []:
            if file.suffix not in (".py", ".so", ".pyd") or ".." in file.parts:
                continue
            parts = [*file.parts[:-1], file.name.split(".")[0]]
            if parts[-1] == "__init__":
                parts.pop()
            for depth in range(1, len(parts) + 1):
                owners.setdefault(".".join(parts[:depth]), set()).add(name)
    return owners


def owner_of(module: str, owners: dict[str, set[str]]) -> str:
    """The one distribution holding `module` (or the longest part of its name one holds
    alone: `pydantic.BaseModel` is `pydantic`'s)."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        held = owners.get(".".join(parts[:depth]), set())
        if len(held) == 1:
            return next(iter(held))
    raise AssertionError(f"no installed distribution holds {module}")


def declared() -> tuple[dict[str, Requirement], dict[str, dict[str, Requirement]]]:
    """The base dependencies, and each extra's, by distribution name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def by_name(lines: list[str]) -> dict[str, Requirement]:
        return {canonicalize_name(r.name): r for r in map(Requirement, lines)}

    extras = project["optional-dependencies"]
    return by_name(project["dependencies"]), {name: by_name(extras[name]) for name in extras}


def test_every_distribution_our_code_imports_is_declared() -> None:
    base, extras = declared()
    owners = module_owners()
    undeclared: set[str] = set()
    for where, module in imports():
        dist = owner_of(module, owners)
        if dist in base:
            continue
        extra, modules = OPTIONAL.get(dist, ("", set[str]()))
        if where in modules and dist in extras.get(extra, {}):
            continue
        undeclared.add(f"{where}: {dist}")
    assert sorted(undeclared) == []


def test_private_modules_are_imported_only_from_dependencies_pinned_to_a_series() -> None:
    base, _ = declared()
    private = {
        f"{where}: {module}"
        for where, module in imports()
        if any(part.startswith("_") for part in module.split("."))
        and module.partition(".")[0] not in PINNED_SERIES
    }
    assert private == set()  # e.g. httpx._utils, gone in httpx 1.0: every command failed
    for name in PINNED_SERIES:
        upper = [s for s in base[name].specifier if s.operator == "<"]
        assert upper, f"{name} has no upper bound: its private modules can change in any release"
        assert upper[0].version.count(".") == 1, f"{name} is not held to one minor series"


def test_httpx_is_held_below_1_0() -> None:
    base, _ = declared()
    # httpx 1.0 (pre-releases on PyPI now) has a new API: without the bound, any install that
    # picks it up (`pip install --pre`, or 1.0 final) cannot even run `--version`.
    assert not base["httpx"].specifier.contains("1.0.0", prereleases=True)
    assert base["httpx"].specifier.contains("0.28.1")
