"""Debounce: a burst of quick messages becomes one turn; commands and other people stay separate."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from conversation.debounce import Debouncer
from ground.turns import merge
from ground.types import InboundMessage
from tests.support.messages import inbound

WINDOW_S = 0.8
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


class ManualTimer:
    """A sleep that only ends when the test moves time forward."""

    def __init__(self) -> None:
        self.now = 0.0
        self._waiters: list[tuple[float, asyncio.Future[None]]] = []

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self.now + seconds, future))
        await future

    async def advance(self, seconds: float) -> None:
        await self._settle()
        self.now += seconds
        for deadline, future in self._waiters:
            if deadline <= self.now and not future.done():
                future.set_result(None)
        self._waiters = [(d, f) for d, f in self._waiters if not f.done()]
        await self._settle()

    @staticmethod
    async def _settle() -> None:
        for _ in range(10):
            await asyncio.sleep(0)


class Turns:
    def __init__(self) -> None:
        self.turns: list[InboundMessage] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.turns.append(message)

    def texts(self) -> list[str]:
        return [t.text for t in self.turns]


def setup() -> tuple[Debouncer, ManualTimer, Turns]:
    timer, turns = ManualTimer(), Turns()
    return Debouncer(turns, window_s=WINDOW_S, sleep=timer.sleep), timer, turns


def msg(text: str, seconds: float = 0.0, **kw: object) -> InboundMessage:
    return inbound(text, timestamp=T0 + timedelta(seconds=seconds), **kw)  # type: ignore[arg-type]


async def test_three_quick_messages_become_one_turn() -> None:
    debouncer, timer, turns = setup()
    burst = [msg("so", 0.0, message_id="m1"), msg("about tomorrow", 0.3, message_id="m2"),
             msg("are you free?", 0.6, message_id="m3", mentioned=False)]
    for message in burst:
        await debouncer.submit(message)
        await timer.advance(0.3)
    assert turns.turns == []  # the sender has not paused yet
    await timer.advance(WINDOW_S)
    assert len(turns.turns) == 1
    turn = turns.turns[0]
    assert turn.text == "so\nabout tomorrow\nare you free?"
    assert turn.message_id == "m3"
    assert turn.timestamp == T0
    assert turn.mentioned  # the first message mentioned the bot; merging must not lose that


async def test_two_spaced_messages_stay_apart() -> None:
    debouncer, timer, turns = setup()
    await debouncer.submit(msg("good morning"))
    await timer.advance(WINDOW_S + 0.2)
    await debouncer.submit(msg("did you sleep well?"))
    await timer.advance(WINDOW_S + 0.2)
    assert turns.texts() == ["good morning", "did you sleep well?"]


async def test_commands_are_never_merged_and_keep_their_place() -> None:
    debouncer, timer, turns = setup()
    await debouncer.submit(msg("hi"))
    await timer.advance(0.1)
    await debouncer.submit(msg("/forget that"))
    await timer.advance(0.1)
    await debouncer.submit(msg("/help"))
    await timer.advance(0.1)
    await debouncer.submit(msg("thanks"))
    await timer.advance(WINDOW_S)
    assert turns.texts() == ["hi", "/forget that", "/help", "thanks"]


async def test_other_senders_and_chats_are_independent() -> None:
    debouncer, timer, turns = setup()
    await debouncer.submit(msg("ana one", sender_id="ana", chat_id="group"))
    await debouncer.submit(msg("bob one", sender_id="bob", chat_id="group"))
    await debouncer.submit(msg("ana elsewhere", sender_id="ana", chat_id="dm"))
    await timer.advance(0.2)
    await debouncer.submit(msg("ana two", sender_id="ana", chat_id="group"))
    await timer.advance(WINDOW_S)
    assert sorted(turns.texts()) == ["ana elsewhere", "ana one\nana two", "bob one"]


async def test_a_long_burst_is_answered_without_waiting_for_a_pause() -> None:
    timer, turns = ManualTimer(), Turns()
    debouncer = Debouncer(turns, window_s=WINDOW_S, sleep=timer.sleep, max_messages=3)
    for n in range(4):
        await debouncer.submit(msg(f"part {n}"))
        await timer.advance(0.1)
    assert turns.texts() == ["part 0\npart 1\npart 2"]
    assert debouncer.pending() == 1


async def test_flush_on_shutdown_emits_what_is_waiting() -> None:
    debouncer, _, turns = setup()
    await debouncer.submit(msg("last words"))
    await debouncer.flush()
    assert turns.texts() == ["last words"]
    assert debouncer.pending() == 0


async def test_a_failing_turn_does_not_stop_later_ones() -> None:
    timer = ManualTimer()
    seen: list[str] = []

    async def emit(message: InboundMessage) -> None:
        seen.append(message.text)
        if message.text == "boom":
            raise RuntimeError("model down")

    debouncer = Debouncer(emit, window_s=WINDOW_S, sleep=timer.sleep)
    await debouncer.submit(msg("boom"))
    await timer.advance(WINDOW_S)
    await debouncer.submit(msg("still there?"))
    await timer.advance(WINDOW_S)
    assert seen == ["boom", "still there?"]


async def test_real_timer_merges_a_quick_burst() -> None:
    turns = Turns()
    debouncer = Debouncer(turns, window_s=0.05)
    await debouncer.submit(msg("a"))
    await debouncer.submit(msg("b"))
    await asyncio.sleep(0.15)
    await debouncer.drain()
    assert turns.texts() == ["a\nb"]


async def test_commands_sent_quickly_are_answered_in_the_order_sent() -> None:
    answered: list[str] = []

    async def slow_first(turn: InboundMessage) -> None:
        if turn.text == "/first":
            await asyncio.sleep(0.05)  # the first command takes longer than the next two
        answered.append(turn.text)

    debouncer = Debouncer(slow_first, window_s=0.01)
    for text in ("/first", "/second", "/third"):
        await debouncer.submit(msg(text))
    await debouncer.drain()
    assert answered == ["/first", "/second", "/third"]


def test_a_merged_turn_names_every_message_it_answers() -> None:
    one, two, three = (inbound("so", message_id="1"), inbound("about that", message_id="2"),
                       inbound("trip", message_id="3"))
    turn = merge([one, two, three])
    assert turn.text == "so\nabout that\ntrip" and turn.message_id == "3" and turn.merged_ids == ("1", "2")
    assert merge([turn, inbound("too", message_id="4")]).merged_ids == ("1", "2", "3")
