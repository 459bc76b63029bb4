"""Stand-ins for a platform channel and for sleeping, for tests that drive a real DeliveryWorker."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from ground.types import ButtonHandler, InboundHandler, OutboundMessage, RenderedChunk, SentMessage
from tests.support.clock import FakeClock


class FakeChannel:
    """Implements the delivery contract; chunks are the ``|``-separated parts of the text, sent as bold HTML.

    Failures are scripted per chunk (by its plain text); ``hold`` makes a chunk wait until released.
    """

    def __init__(self, name: str = "telegram", *, id_prefix: str = "pm") -> None:
        self.name = name
        self.id_prefix = id_prefix
        self.delivered: list[tuple[str, str]] = []  # (chat_id, text as the platform received it)
        self.attempts: list[tuple[str, bool]] = []  # (chunk plain text, plain?)
        self.typing_calls = 0
        self._failures: dict[str, list[Exception]] = defaultdict(list)
        self._holds: dict[str, asyncio.Event] = {}
        self.reached: dict[str, asyncio.Event] = defaultdict(asyncio.Event)

    def fail(self, chunk: str, *errors: Exception) -> None:
        self._failures[chunk].extend(errors)

    def recover(self, chunk: str) -> None:
        """Forget the failures still scripted for ``chunk``."""
        self._failures.pop(chunk, None)

    def hold(self, chunk: str) -> asyncio.Event:
        gate = self._holds[chunk] = asyncio.Event()
        return gate

    async def start(self, on_message: InboundHandler, on_button: ButtonHandler | None = None) -> None:
        raise AssertionError("the worker never starts a channel")

    async def stop(self) -> None:
        raise AssertionError("the worker never stops a channel")

    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        return [RenderedChunk(text=f"<b>{part}</b>", parse_mode="HTML", plain=part)
                for part in message.text.split("|")]

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool) -> SentMessage:
        self.attempts.append((chunk.plain, plain))
        self.reached[chunk.plain].set()
        if chunk.plain in self._holds:
            await self._holds[chunk.plain].wait()
        if self._failures[chunk.plain]:
            raise self._failures[chunk.plain].pop(0)
        self.delivered.append((message.chat_id, chunk.plain if plain else chunk.text))
        return SentMessage(platform_message_id=f"{self.id_prefix}{len(self.delivered)}")

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        self.typing_calls += 1

    def texts(self, chat_id: str = "c1") -> list[str]:
        return [text for chat, text in self.delivered if chat == chat_id]


class FakeSleep:
    """Records every wait and moves the fake clock instead of waiting."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds=seconds)
        await asyncio.sleep(0)


class SteppedSleep:
    """A sleep that ends only when the test says so: each refresh happens on the test's word, not the clock's."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._ends: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await self._ends.get()

    async def end_one(self) -> None:
        """End the current wait and let what follows it run up to its next wait."""
        waiting = len(self.waits)
        self._ends.put_nowait(None)
        for _ in range(100):
            await asyncio.sleep(0)
            if len(self.waits) > waiting:
                return


async def send_anything(_message: OutboundMessage) -> bool:
    """A delivery worker's ``may_send`` for tests of delivery itself, where the policy is not the question."""
    return True
