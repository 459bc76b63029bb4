"""The conversation core: one inbound message in, one reply out, the same for every channel.

It records the person's message before anything else, builds the bounded prompt (persona,
memory slots, summary, recent window), asks the model, records the reply, and hands
after-reply work (summaries, memory capture) to background tasks so it never delays a reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from conversation.context import BuiltPrompt, HistoryTurn, PromptParts, build_prompt
from conversation.history_window import Window, WindowCache, extend, read_window, still_tail, window_after
from conversation.summarizer import Summarizer
from ground.background import BackgroundTasks
from ground.config import Settings
from ground.db import Connection, Database
from ground.keyed_locks import KeyedLocks
from ground.tunables import HISTORY_WINDOW_CACHE_THREADS, MAX_TOOL_ROUNDS, MEMORY_SLOTS_TIMEOUT_S
from ground.turns import CompletedTurn, MemoryContext, MemorySlots, Speaker, Tool, TurnObserver
from ground.types import ChatKind, InboundMessage, OutboundMessage, SeenImage, reply_to
from llm.client import HONEST_FAILURE_REPLY, LLMClient, LLMError, TextSink
from llm.vision import with_images
from media.reader import DOCUMENT, PHOTO
from people import directory, history
from persona.card import render_card
from persona.instructions import TOOL_FAILED, unknown_tool
from persona.labels import PHOTO_EARLIER, PHOTO_SHOWN, PHOTO_UNSEEN, document_mark, photo_line, speaker_line

log = logging.getLogger("kith.core")


AlsoWithReply = Callable[[Connection, OutboundMessage], None]  # runs where the reply is recorded
# Runs where the turn opens, with its message's history row (recorded now, or by a turn resumed after a restart).
OnOpened = Callable[[Connection, int], None]


@dataclass(frozen=True, slots=True)
class _OpenedTurn:
    speaker: Speaker
    user_id: int
    window: Window  # the thread's recent messages, ending with this turn's, and its summary


@dataclass
class TurnTimings:
    """Core overhead of one turn, in milliseconds, excluding the model's own time."""

    before_llm_ms: float = 0.0
    after_llm_ms: float = 0.0  # until the reply leaves the core; the outbox and channel come after
    request_at: float = 0.0  # time.perf_counter() when the model request left the core
    reply_at: float = 0.0  # time.perf_counter() when the model's reply arrived


@dataclass
class ConversationCore:
    settings: Settings
    db: Database
    llm: LLMClient
    clock: Callable[[], datetime]
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    memory: MemoryContext | None = None
    observers: list[TurnObserver] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    last_timings: TurnTimings = field(default_factory=TurnTimings)
    on_llm_error: Callable[[LLMError], None] | None = None
    persona_notes: list[str] = field(default_factory=list)  # standing notes for the persona card

    def __post_init__(self) -> None:
        self.summarizer = Summarizer(self.db, self.llm, self.settings, self.clock)
        self._locks = KeyedLocks()  # one turn per conversation at a time
        self.windows = WindowCache(capacity=HISTORY_WINDOW_CACHE_THREADS if self.db.serializes_writers else 0)
        self.busy_people: set[str] = set()

    async def speaker_of(self, message: InboundMessage) -> Speaker:
        person = await self.db.run(directory.resolve, message.account, message.sender_name, self.clock())
        return Speaker(person, message.account, message.sender_name)

    def _open_turn(self, conn: Connection, message: InboundMessage, kept: Window | None,
                   opened: OnOpened | None) -> _OpenedTurn:
        """Everything a turn reads and writes before the model call, in one transaction.

        A turn resumed after a restart (``message.opened_row``) goes on from the row recorded then.
        """
        person = directory.resolve(conn, message.account, message.sender_name, self.clock())
        row = self._resumed_row(conn, message)
        if row is None:
            # A forward is recorded as the sender's message but as no one's words: capture and the nightly
            # consolidation take evidence only from rows with the person on them.
            row = history.append_row(
                conn, conversation=message.conversation_key, role="user", author=message.account,
                person=None if message.forwarded else person,
                platform=message.platform, chat_id=message.chat_id, thread_id=message.thread_id,
                chat_kind=message.chat_kind.value, platform_message_id=message.message_id, text=message.text,
                created_at=message.timestamp, medium=message.medium)
            if opened is not None:
                opened(conn, row.id)
            window = window_after(conn, kept, message.conversation_key, row, self._window_size)
        else:
            if opened is not None:  # a turn taken up again is worked on again
                opened(conn, row.id)
            # The thread may have moved on since (another person's message in a group): as it was then.
            window = read_window(conn, message.conversation_key, self._window_size, through_id=row.id)
        return _OpenedTurn(Speaker(person, message.account, message.sender_name), row.id, window)

    @staticmethod
    def _resumed_row(conn: Connection, message: InboundMessage) -> history.StoredMessage | None:
        if message.opened_row is None:
            return None
        row = history.get(conn, message.opened_row)
        if row is None or row.conversation != message.conversation_key or row.role != "user":
            return None  # not the row it names (a restored backup, say): record the message anew
        return row

    @property
    def _window_size(self) -> int:
        return self.settings.history.window_messages + 1  # the window plus the message being answered

    async def handle(self, message: InboundMessage, *, also: AlsoWithReply | None = None,
                     opened: OnOpened | None = None, on_text: TextSink | None = None,
                     images: Sequence[SeenImage] = ()) -> OutboundMessage:
        """Answer one message; a model failure gives an honest reply and loses nothing stored.

        ``also`` runs in the transaction that records the reply in history (e.g. its outbox entry:
        the reply and its delivery then stand or fall together); an honest failure reply is not
        recorded, so ``also`` does not run for it. ``opened`` runs in the one that opens the
        turn (recording the person's message, unless a resumed turn recorded it before). ``on_text``, when given,
        hears the reply's text as the model streams it (a preview: the reply itself is what this returns).
        ``images``: the photos the message came with, shown to the model with it, for this reply only.
        """
        started = time.perf_counter()
        conversation = message.conversation_key
        async with self._locks.hold([conversation]):
            try:
                turn = await self.db.run_short(self._open_turn, message, self.windows.get(conversation), opened)
            except BaseException:
                self.windows.drop(conversation)
                raise
            self.windows.put(conversation, turn.window)  # committed: its newest row exists for good
            self.busy_people.add(turn.speaker.person)
            try:
                return await self._answer(message, turn, started, also, on_text, images)
            finally:
                self.busy_people.discard(turn.speaker.person)

    async def _answer(self, message: InboundMessage, opened: _OpenedTurn, started: float,
                      also: AlsoWithReply | None, on_text: TextSink | None = None,
                      images: Sequence[SeenImage] = ()) -> OutboundMessage:
        speaker = opened.speaker
        window = opened.window
        prompt, shown = await self._prompt(message, speaker, window.rows, window.summary, opened.user_id,
                                           shows_images=bool(images))
        if images:
            last = prompt.messages[-1]
            prompt.messages[-1] = {**last, "content": with_images(str(last["content"]), images)}
        before = self.last_timings.request_at = time.perf_counter()
        self.last_timings.before_llm_ms = (before - started) * 1000
        try:
            text = await self._complete_with_tools(prompt.messages, speaker, message, on_text)
        except LLMError as exc:
            log.warning("reply failed platform=%s chat=%s person=%s kind=%s", message.platform,
                        message.chat_id, speaker.person, exc.kind)
            if self.on_llm_error is not None:
                self.on_llm_error(exc)
            return self._outbound(message, HONEST_FAILURE_REPLY)
        after = self.last_timings.reply_at = time.perf_counter()
        out = self._outbound(message, text)
        # The kept window, not this turn's: none where windows are not kept, so no lookup is spent on it.
        kept = self.windows.get(message.conversation_key)
        try:
            reply, follows = await self.db.run_short(self._record_reply, message, out, also, kept)
        except BaseException:
            self.windows.drop(message.conversation_key)
            raise
        if kept is not None and follows:
            self.windows.put(message.conversation_key, extend(kept, reply, self._window_size))
        else:
            self.windows.drop(message.conversation_key)
        turn = CompletedTurn(speaker, message, opened.user_id, text, reply.id, shown)
        if window.older >= self.settings.history.summary_trigger_messages:
            self.background.spawn(self.summarizer.maybe_summarize(message.conversation_key), name="summary")
        for observer in self.observers:
            self.background.spawn(observer.after_reply(turn), name=type(observer).__name__)
        self.last_timings.after_llm_ms = (time.perf_counter() - after) * 1000
        return out

    def _record_reply(self, conn: Connection, message: InboundMessage, out: OutboundMessage,
                      also: AlsoWithReply | None, kept: Window | None) -> tuple[history.StoredMessage, bool]:
        """The reply in history (and ``also``); whether it directly follows ``kept`` in its thread."""
        reply = history.append_row(
            conn, conversation=message.conversation_key, role="assistant", author="kith",
            platform=message.platform, chat_id=message.chat_id, thread_id=message.thread_id,
            chat_kind=message.chat_kind.value, text=out.text, created_at=self.clock())
        follows = still_tail(conn, kept, message.conversation_key, reply)
        if also is not None:
            also(conn, out)
        return reply, follows

    def _outbound(self, message: InboundMessage, text: str) -> OutboundMessage:
        return reply_to(message, text)

    async def prompt_for(self, message: InboundMessage, speaker: Speaker) -> tuple[BuiltPrompt, tuple[str, ...]]:
        """The prompt a reply to ``message`` would be built from, without recording anything."""
        conv = message.conversation_key
        rows = await self.db.run(history.recent, conv, self.settings.history.window_messages)
        summary = await self.db.run(history.get_summary, conv)
        return await self._prompt(message, speaker, rows, summary, None)

    async def _prompt(self, message: InboundMessage, speaker: Speaker, recent_rows: Sequence[history.StoredMessage],
                      summary: history.Summary, exclude_id: int | None, *,
                      shows_images: bool = False) -> tuple[BuiltPrompt, tuple[str, ...]]:
        hs = self.settings.history
        slots = MemorySlots()
        shown: tuple[str, ...] = ()
        if self.memory is not None:
            try:
                async with asyncio.timeout(MEMORY_SLOTS_TIMEOUT_S):  # unlike wait_for, no extra task per turn
                    slots = await self.memory.slots(speaker, message)
                shown = slots.shown_ids
            except Exception as exc:  # memory trouble must never block a reply
                log.warning("memory slots unavailable person=%s error=%s", speaker.person, type(exc).__name__)
        group = message.chat_kind is ChatKind.GROUP
        # In a group each line says who spoke (persona.labels.speaker_line quotes the name: it is data).
        turns = [HistoryTurn(m.role, _as_read(m, group), m.author)
                 for m in recent_rows if m.id != exclude_id and not m.silent and m.id > summary.through
                 and m.role in ("user", "assistant")][-hs.window_messages:]
        persona = render_card(self.settings.persona, now=self.clock(), extra_sections=self._tool_hints())
        said = _with_mark(message.text, message.medium, PHOTO_SHOWN if shows_images else PHOTO_UNSEEN)
        new_text = speaker_line(speaker.name, said) if group else said
        parts = PromptParts(persona=persona, new_message=new_text, memory=slots, summary=summary.text,
                            recent=turns, speaker=speaker.name)
        return build_prompt(parts, self.settings.budget), shown

    def _tool_hints(self) -> tuple[str, ...]:
        return (*self.persona_notes, *(h for h in (getattr(t, "hint", "") for t in self.tools) if h))

    async def _complete_with_tools(self, messages: Sequence[dict[str, Any]], speaker: Speaker,
                                   message: InboundMessage, on_text: TextSink | None = None) -> str:
        convo: list[dict[str, Any]] = list(messages)
        specs = [t.spec() for t in self.tools] or None
        by_name = {t.name: t for t in self.tools}
        for _round in range(MAX_TOOL_ROUNDS + 1):
            reply = await self.llm.complete(convo, tools=specs if _round < MAX_TOOL_ROUNDS else None, on_text=on_text)
            if not reply.tool_calls:
                text = reply.text.strip()
                if not text:
                    raise LLMError("empty")
                return text
            convo.append({"role": "assistant", "content": reply.text or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.tool_calls]})
            for call in reply.tool_calls:
                tool = by_name.get(call.name)
                if tool is None:
                    result = json.dumps({"error": unknown_tool(call.name)})
                else:
                    try:
                        result = await tool.call(call.parsed_arguments(), speaker, message)
                    except Exception as exc:
                        log.warning("tool failed name=%s error=%s", call.name, type(exc).__name__)
                        result = json.dumps({"error": TOOL_FAILED})
                convo.append({"role": "tool", "tool_call_id": call.id, "content": result})
        raise LLMError("tool_loop")


def _as_read(row: history.StoredMessage, group: bool) -> str:
    """An earlier message as the prompt shows it: a photo's or document's mark before its caption, and in a group
    who spoke."""
    text = _with_mark(row.text, row.medium, PHOTO_EARLIER)
    return speaker_line(row.author.split(":")[-1], text) if group and row.role == "user" else text


def _with_mark(text: str, medium: str, mark: str) -> str:
    """A message that came with photos reads with ``mark`` before its caption, one whose document kith kept with
    that mark; any other as it was said."""
    if medium == PHOTO:
        return photo_line(mark, text)
    return document_mark(text) if medium == DOCUMENT else text
