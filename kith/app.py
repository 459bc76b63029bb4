"""Wiring: build the parts of a running kith from settings. No decisions live here."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

from conversation.chat_commands import ChatCommands
from conversation.core import ConversationCore
from conversation.linking import Linker
from conversation.memory_commands import MemoryCommands, QuestionSender
from conversation.router import Router
from delivery.inbound import Cursors, InboundJournal
from delivery.inbox import Inbox
from delivery.retention import Retention
from delivery.worker import DeliveryWorker
from ground.background import BackgroundTasks
from ground.config import Settings
from ground.db import Database
from ground.person_data import PersonData, move_person
from ground.private_files import tighten
from ground.tunables import (
    GC_THRESHOLDS,
    SHUTDOWN_DELIVERY_S,
)
from ground.types import Channel, utcnow
from heartbeat.scheduler import HeartbeatScheduler
from heartbeat.service import Heartbeat, build_heartbeat
from heartbeat.settings import resolve_timezone
from kith.control.serve import serve_control
from kith.model_start import new_model_process
from kith.person_data import gathered
from kith.person_export import PersonExport
from kith.schema import create_schema
from kith.settings import PLATFORMS
from llm.client import LLMClient, LLMError, import_litellm
from llm.process import ModelProcess
from memory.controls import MemoryControls, PauseBook, QuestionBook
from memory.encoders import open_reranker
from memory.goals import GoalBook, GoalsCommand, GoalsInContext
from memory.recall import RecallEngine, RecallMemoryContext, RecallTool, UseRecorder
from memory.service import MemoryService
from persona.instructions import MEMORY_CONTROLS_HINT
from policy.gate import PolicyGate
from policy.settings import PolicySettings

log = logging.getLogger("kith.app")


@dataclass
class App:
    """Every part of a running kith, built at once by :func:`build_app`.

    Its life: :meth:`start` serves on the channels, :meth:`stop` stops serving, :meth:`close` also closes what
    :func:`build_app` opened; :meth:`running` does all three around the time it runs, with operator commands
    served meanwhile (``bot.py run`` and ``chat``).
    """

    settings: Settings
    db: Database
    llm: LLMClient
    core: ConversationCore
    background: BackgroundTasks
    gate: PolicyGate
    journal: InboundJournal
    inbox: Inbox
    cursors: Cursors
    commands: ChatCommands
    worker: DeliveryWorker
    router: Router
    memory: MemoryService
    linker: Linker
    recall: RecallEngine
    question_sender: QuestionSender
    memory_commands: MemoryCommands
    person_data: tuple[PersonData, ...]  # what kith keeps about a person: what a link moves, an export holds
    # The running channels by name: filled by start_channels, shared with the worker and the router.
    channels: dict[str, Channel]
    clock: Callable[[], datetime] = utcnow
    heartbeat: Heartbeat | None = None  # started by start, after delivery
    scheduler: HeartbeatScheduler | None = None
    model_process: ModelProcess | None = None
    warming: asyncio.Task[None] | None = None  # load_model_client, spawned by build_app
    retention: Retention | None = None  # prunes the inbound journal and the delivered outbox while running

    async def load_model_client(self) -> None:
        await load_model_client(self.model_process)

    async def start(self, channels: list[Channel]) -> list[str]:
        """Serve on ``channels``: start them, then delivery, retention and the heartbeat. Returns the names of
        the channels that started (one failing to start does not stop the others)."""
        await self.gate.refresh()
        left = await self.inbox.leftovers()  # before any channel takes a message in itself
        started = await self.start_channels(channels)
        await self.start_delivery()
        self.start_retention()
        # Messages a previous process took in and did not answer are answered now (new ones wait until those
        # are queued).
        await self.router.resume(left, started)
        self.heartbeat, self.scheduler = await start_heartbeat(self)
        return started

    async def start_channels(self, channels: list[Channel]) -> list[str]:
        """Start each channel, taking messages in; returns the names of those that started."""
        self.channels.clear()
        self.channels.update((c.name, c) for c in channels)
        started = []
        for channel in channels:
            try:
                await channel.start(self.router.on_message, self.router.on_button)
                started.append(channel.name)
            except Exception as exc:
                log.error("channel failed to start name=%s error=%s", channel.name, type(exc).__name__)
        return started

    async def start_delivery(self) -> None:
        """Start the delivery worker: replies a previous process produced but did not deliver go out now, once."""
        await self.worker.start()

    def start_retention(self) -> None:
        """Start pruning the inbound journal and the delivered outbox, in the background."""
        self.retention = Retention(self.db, self.journal, clock=self.clock,
                                   sent_retention_days=self.settings.delivery.sent_retention_days)
        self.retention.start()

    async def stop(self) -> None:
        """Stop serving: the heartbeat, then delivery (what can still be delivered goes out while the channels
        can send), retention, and the channels."""
        if self.scheduler is not None:
            await self.scheduler.shutdown()
        # Whatever is left stays pending in the outbox (the worker is cancelled, never failed) and goes out at
        # the next start.
        try:
            await asyncio.wait_for(self.router.close(), SHUTDOWN_DELIVERY_S)
        except TimeoutError:
            log.warning("shutdown left undelivered replies in the outbox; they go out at the next start")
        await self.worker.stop()
        if self.retention is not None:
            await self.retention.stop()
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception as exc:
                log.warning("channel stop failed name=%s error=%s", channel.name, type(exc).__name__)

    async def close(self) -> None:
        """Stop serving, then close every part :func:`build_app` opened (the database last)."""
        await self.stop()
        if self.warming is not None:
            self.warming.cancel()  # nothing waits on it any more; a child still loading is killed below
        await self.background.drain(timeout=5)
        await self.background.cancel_all()
        await self.recall.close()
        await self.memory.close()
        if self.model_process is not None:
            await self.model_process.close()
        self.db.close()

    @contextlib.asynccontextmanager
    async def running(self, channels: list[Channel]) -> AsyncIterator[list[str]]:
        """Serve on ``channels`` for as long as the body runs, then close everything (however the body ends:
        Ctrl-C and SIGTERM cancel it). Yields the started channels' names; while any runs, operator commands
        are served here (:mod:`kith.control`), never beside."""
        control = None
        try:
            started = await self.start(channels)
            if started:
                control = await serve_control(self)
                freeze_startup_heap()
            yield started
        finally:
            if control is not None:
                await control.close()
            await self.close()


class NotGiven:
    """build_app's default for ``model_process`` (None means: no model process)."""


NOT_GIVEN = NotGiven()


async def load_model_client(model_process: ModelProcess | None) -> None:
    """Load litellm where the calls are made: the model process, or this process off the event loop."""
    if model_process is None:
        await asyncio.to_thread(import_litellm)
        gc.freeze()  # it may finish after freeze_startup_heap: its modules live as long as the process too
        return
    try:
        await model_process.start()
    except Exception as exc:  # the first reply tries again and answers honestly if it cannot
        log.error("model process failed to start error=%s", type(exc).__name__)


def open_database(settings: Settings) -> Database:
    settings.storage.data_path().mkdir(parents=True, exist_ok=True)
    tighten(settings.storage.data_path())  # made by an older kith, or under a looser umask
    db = Database(settings.storage.resolved_database_url())
    create_schema(db)
    return db


async def build_app(settings: Settings, *, clock: Callable[[], datetime] = utcnow,
                    warm_llm: bool = True, model_process: ModelProcess | NotGiven | None = NOT_GIVEN,
                    on_llm_error: Callable[[LLMError], None] | None = None) -> App:
    """Every part, wired. ``model_process``: one the caller made (and may already be starting); by default
    one is made here when ``[llm] separate_process`` is on. ``on_llm_error`` hears of each failed model call
    (the commands print a hint once)."""
    if isinstance(model_process, NotGiven):
        model_process = new_model_process(settings)
    try:
        return await _build_app(settings, clock=clock, warm_llm=warm_llm, model_process=model_process,
                                on_llm_error=on_llm_error)
    except BaseException:
        if model_process is not None:
            await model_process.close()
        raise


async def _build_app(settings: Settings, *, clock: Callable[[], datetime], warm_llm: bool,
                     model_process: ModelProcess | None, on_llm_error: Callable[[LLMError], None] | None) -> App:
    background = BackgroundTasks()
    # litellm takes seconds to load: it loads (in the model process, when there is one) while the rest starts.
    warming = background.spawn(load_model_client(model_process), name="load-litellm") if warm_llm else None
    db = open_database(settings)
    llm = LLMClient(settings.llm, calls=model_process)
    policy = PolicySettings.from_mapping(settings.policy or None, platforms=PLATFORMS)
    gate = PolicyGate(db, policy, configured=set(settings.policy),
                      clock=clock)
    pauses = PauseBook(db)
    await pauses.load()
    memory = await MemoryService.open(settings, db, llm, clock=clock, is_paused=pauses.is_paused)
    # Only the prompt's and the tool's recall reorders by the cross-encoder; commands that act rank by matching
    # alone, so the model is loaded here, not with memory (operator commands never load it).
    reranker, _status = await open_reranker(settings.memory.reranker)
    recall = RecallEngine(memory.store, settings.recall, clock, reranker=reranker)
    goals = GoalBook(db, clock, resolve_timezone(settings.heartbeat.timezone))
    # Building every person's lexical index takes seconds on a large store: never on a reply's path.
    background.spawn(memory.store.indexes.warm(), name="memory-warm")
    background.spawn(goals.warm(), name="goals-warm")
    questions = QuestionBook(db, clock)
    channels: dict[str, Channel] = {}
    worker = DeliveryWorker(db, channels, gate.may_send, settings=settings.delivery, clock=clock)
    question_sender = QuestionSender(db=db, memory=memory, book=questions, outbound=worker, clock=clock)
    core = ConversationCore(
        settings=settings, db=db, llm=llm, clock=clock, background=background,
        memory=GoalsInContext(RecallMemoryContext(recall, settings.recall, settings.budget), goals,
                              settings.budget.goals_chars),
        # The memory service's observer is there capture on or off: a reply written while a forget landed
        # loses the words there too.
        observers=[UseRecorder(memory.store, clock), memory.observer, question_sender],
        tools=[RecallTool(recall, settings.recall)], persona_notes=[MEMORY_CONTROLS_HINT],
        on_llm_error=on_llm_error)
    person_data = gathered(memory, pauses)
    controls = MemoryControls(memory, questions, pauses, db, clock, pinned_max=settings.recall.pinned_max,
                              on_change=recall.forget_pinned, drop_window=core.windows.drop,
                              exporter=PersonExport(db, memory, clock, person_data).yours)
    commands = ChatCommands(settings.persona.name)
    # A linked account's person: everything kept about them follows.
    linker = Linker(db, clock, worker, on_moved=functools.partial(move_person, db, person_data))
    commands.register("link", "use me from another platform as the same person", linker.issue)
    commands.register_button("l", linker.press)
    commands.register("goals", GoalsCommand.description, GoalsCommand(goals))
    memory_commands = MemoryCommands(db=db, controls=controls, sender=question_sender, clock=clock)
    memory_commands.register(commands)
    inbox = Inbox(db, clock=clock)
    journal = InboundJournal(db, clock=clock, inbox=inbox)
    router = Router(core, channels, worker, gate, journal, debounce_s=settings.delivery.debounce_ms / 1000,
                    typing_refresh_s=settings.delivery.typing_refresh_s,
                    typing_delay_s=settings.delivery.typing_delay_s, commands=commands, buttons=commands.press,
                    pending=memory_commands.answer_if_pending, kept=inbox)
    return App(settings=settings, db=db, llm=llm, core=core, background=background, gate=gate, journal=journal,
               inbox=inbox, cursors=Cursors(db), commands=commands, worker=worker, router=router, memory=memory,
               linker=linker, recall=recall, question_sender=question_sender, memory_commands=memory_commands,
               person_data=person_data, channels=channels, clock=clock, model_process=model_process, warming=warming)


def freeze_startup_heap() -> None:
    """Keep the garbage collector off what start-up built to last (imported libraries, settings).

    Those objects never die, yet every full collection walked them all: pauses of up to 200 ms
    measured here, landing on whichever reply was under way. From here on the collector runs less
    often, too (``GC_THRESHOLDS``).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def start_heartbeat(app: App) -> tuple[Heartbeat, HeartbeatScheduler]:
    """Build the heartbeat over a running app and start its scheduler (call after the delivery worker exists)."""
    sweep = app.question_sender.sweep
    heartbeat = build_heartbeat(settings=app.settings, db=app.db, llm=app.llm, memory=app.memory, clock=app.clock,
                                busy=app.core.busy_people, outbound=app.worker, questions=sweep)
    scheduler = HeartbeatScheduler(app.db.engine, heartbeat, hb=heartbeat.hb,
                                   consolidation_hour=app.settings.memory.consolidation_hour, tz=heartbeat.tz,
                                   clock=app.clock)
    heartbeat.attach(scheduler)
    await scheduler.start()
    return heartbeat, scheduler
