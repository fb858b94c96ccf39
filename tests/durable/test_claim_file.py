"""A SQLite store's claim lock (`gateway.durable.claims`) leaves no file beside the store, and
deleting that file as it is let go never lets two processes hold the claim."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.durable.claims import Claim, claim

pytestmark = pytest.mark.anyio


async def test_a_claim_let_go_leaves_no_file_beside_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    held = await claim(url, "r1")
    assert (tmp_path / "runs.sqlite-claim").exists()  # while it is held
    await held.release()
    assert os.listdir(tmp_path) == []  # was: runs.sqlite-claim, for ever


async def test_a_waiter_on_the_deleted_file_does_not_share_the_claim(tmp_path: Path) -> None:
    """Each `Claim` opens the file itself: to `flock` they are two processes."""
    url = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    first, waiter, third = Claim(url, "r1"), Claim(url, "r1"), Claim(url, "r1")
    assert first.try_take()
    assert not waiter.try_take()  # it has the file open, and waits
    await first.release()  # deletes the file, then lets go
    assert third.try_take()  # a new file under the name
    # The waiter's lock on the deleted file is free now: it must not count.
    assert not waiter.try_take()
    await third.release()
    assert waiter.try_take()
    await waiter.release()
    assert not (tmp_path / "runs.sqlite-claim").exists()
