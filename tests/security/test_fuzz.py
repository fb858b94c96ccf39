"""Fuzzing a real gateway process with JSON-RPC, over HTTP and stdio, in both protocol eras.

Hypothesis draws valid and invalid messages (wrong types, huge ids, unknown methods, bad
params, batches, bytes that are not UTF-8 or not JSON); each gets the answer it is owed (see
`fuzz_messages`), nothing hangs (every exchange is bounded), the process never dies, and a
valid call works after every example. `AGENT_GATEWAY_FUZZ_EXAMPLES` sets the examples per
transport and era (default 55, each of 24-28 messages: over 5,000 messages in all).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.server.processes import TIMES_42, http_server, write_config

from .fuzz_messages import REFUSAL_CODES, Expect, Fuzz, Transport, fuzz_messages
from .wire import ERAS, Era, HttpWire, StdioWire, calculate, calculated, stdio_wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.slow]

EXAMPLES = int(os.environ.get("AGENT_GATEWAY_FUZZ_EXAMPLES", "55"))
PER_EXAMPLE = (24, 28)


@dataclass
class Target:
    """A gateway process under fuzz: one transport, one era, one connection or session."""

    transport: Transport
    era: Era
    http: HttpWire | None = None
    stdio: StdioWire | None = None
    next_number: int = 1000
    sent: Counter[str] = field(default_factory=Counter[str])

    def number(self) -> int:
        self.next_number += 1
        return self.next_number

    async def exchange(self, messages: list[Fuzz]) -> None:
        rendered = [m.render(self.number(), self.era, self.transport) for m in messages]
        with anyio.fail_after(30):
            if self.http is not None:
                for fuzz, (body, expect) in zip(messages, rendered, strict=True):
                    await self._over_http(self.http, fuzz, body, expect)
            else:
                assert self.stdio is not None
                await self._over_stdio(self.stdio, messages, rendered)
            await self.check_a_valid_call()
        self.sent.update(fuzz.category for fuzz in messages)

    async def check_a_valid_call(self) -> None:
        call = calculate(self.number(), self.era)
        if self.http is not None:
            reply = (await self.http.post(json.dumps(call).encode())).reply
        else:
            assert self.stdio is not None
            await self.stdio.send_json(call)
            reply = await self.stdio.reply_to(call["id"])
        assert calculated(reply) == "42", reply

    async def _over_http(self, wire: HttpWire, fuzz: Fuzz, body: bytes, expect: Expect) -> None:
        answer = await wire.post(body)
        where = f"{fuzz.label}: {body[:300]!r} -> {answer.status} {answer.text[:300]}"
        assert answer.status < 500, where
        if expect.category == "silent":
            assert answer.status == 202, where
            return
        reply = answer.reply
        assert reply is not None, where
        check_reply(reply, expect, where)
        if expect.category == "refuse":
            assert answer.status == 400, where

    async def _over_stdio(
        self, wire: StdioWire, messages: list[Fuzz], rendered: list[tuple[bytes, Expect]]
    ) -> None:
        owed: dict[str, tuple[Expect, str]] = {}
        for fuzz, (line, expect) in zip(messages, rendered, strict=True):
            await wire.send(line)
            if expect.category != "silent":
                null = expect.id is None
                key = f"null-{len(owed)}" if null else id_key(expect.id)
                owed[key] = expect, f"{fuzz.label}: {line[:300]!r}"
        nulls = sorted(key for key in owed if key.startswith("null-"))
        while owed:
            message = await wire.receive()
            if "method" in message:
                continue  # the server's own notifications
            request_id = message.get("id")
            key = id_key(request_id) if request_id is not None else (nulls.pop() if nulls else "")
            assert key in owed, f"an answer nobody is owed: {str(message)[:300]}"
            expect, where = owed.pop(key)
            check_reply(message, expect, f"{where} -> {str(message)[:300]}")


def id_key(request_id: object) -> str:
    return json.dumps(request_id)


def check_reply(reply: dict[str, Any], expect: Expect, where: str) -> None:
    assert reply.get("id") == expect.id, where
    error: dict[str, Any] | None = reply.get("error")
    if expect.category == "reply":
        assert "result" in reply or isinstance(error, dict), where
    else:
        assert isinstance(error, dict), where
        message = error.get("message")
        assert isinstance(message, str), where
        assert len(message) < 200, where  # a short message, no dump of the input
        if expect.category == "refuse":
            assert error.get("code") in REFUSAL_CODES, where


TARGETS = [(transport, era) for transport in ("http", "stdio") for era in ERAS]


@pytest.fixture(params=TARGETS, ids=[f"{t}-{e}" for t, e in TARGETS])
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncGenerator[Target]:
    transport, era = request.param
    config = write_config(tmp_path, TIMES_42)
    if transport == "http":
        async with http_server(config) as served, httpx2.AsyncClient(timeout=20) as http:
            wire = HttpWire(http, served.url, era)
            with anyio.fail_after(30):
                await wire.open()
            target = Target(transport, era, http=wire)
            yield target
            await finish(target, served.process.returncode)
    else:
        async with stdio_wire(config) as wire:
            with anyio.fail_after(30):
                await wire.open(era)
            target = Target(transport, era, stdio=wire)
            yield target
            await finish(target, wire.process.returncode)


async def finish(target: Target, returncode: int | None) -> None:
    """After all examples: the process lives, answers, and got the messages it should."""
    assert returncode is None, "the gateway died"
    with anyio.fail_after(30):
        await target.check_a_valid_call()
    total = sum(target.sent.values())
    print(f"\nfuzzed {target.transport} {target.era}: {total} messages {dict(target.sent)}")
    assert total >= EXAMPLES * PER_EXAMPLE[0]


@pytest.mark.timeout(EXAMPLES * 3 + 60)  # ~0.5 s an example on an idle machine
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    # No shrinking: examples share one process, and a report of the first failing example
    # (every message with its answer) says enough.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one gateway process for all examples
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
# Drawn by @given, never inside the test: hypothesis stops an oversized draw with a
# BaseException, which would end anyio's test runner for the fixture too.
@given(messages=st.lists(fuzz_messages(), min_size=PER_EXAMPLE[0], max_size=PER_EXAMPLE[1]))
async def test_every_fuzzed_message_gets_its_answer_and_the_gateway_lives(
    target: Target, messages: list[Fuzz]
) -> None:
    await target.exchange(messages)
