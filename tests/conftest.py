from __future__ import annotations

# Imported here, at a shallow stack: its pytest plugin otherwise imports it while printing the
# summary of a failing run, where Python 3.11.7's compiler can fail ("AST constructor recursion
# depth mismatch") and hide the failures.
import hypothesis  # noqa: F401  # pyright: ignore[reportUnusedImport]
import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _private_data_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chat memory's default file goes to a temp dir, never the user's data directory."""
    monkeypatch.setenv("AGENT_GATEWAY_DATA_DIR", str(tmp_path_factory.mktemp("data")))
