from __future__ import annotations

import uuid
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh run store: a SQLite file, or a new database on the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.sqlite'}"
    server: str = request.getfixturevalue("postgres_url")
    return f"{server.rsplit('/', 1)[0]}/runs_{uuid.uuid4().hex[:12]}"
