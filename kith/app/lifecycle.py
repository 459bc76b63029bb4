"""A built kith's life: start serving on its channels, stop, close (:class:`App`), and the start-up steps around
that (loading the model client, the heartbeat, freezing the start-up heap). :mod:`kith.app.wiring` builds it."""

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
from ground.tunables import GC_THRESHOLDS, SHUTDOWN_DELIVERY_S
from ground.types import Channel, utcnow
from heartbeat.scheduler import HeartbeatScheduler
from heartbeat.service import Heartbeat, build_heartbeat
from kith.control.serve import serve_control
from kith.web.server import WebServer, serve_web
from llm.client import LLMClient, import_litellm
from llm.process import ModelProcess
from memory.recall import RecallEngine
from memory.service import MemoryService
from people import moves
from policy.gate import PolicyGate

log = logging.getLogger("kith.app")


@dataclass
class App:
    """Every part of a running kith, built at once by :func:`kith.app.wiring.build_app`.

    Its life: :meth:`start` serves on the channels, :meth:`stop` stops serving, :meth:`close` also closes what
    was built; :meth:`running` does all three around the time it runs, with operator commands served meanwhile
    (``bot.py run`` and ``chat``).
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
    web: WebServer | None = None  # the memory room ([web] enabled), served beside the control channel

    async def load_model_client(self) -> None:
        await load_model_client(self.model_process)

    async def start(self, channels: list[Channel]) -> list[str]:
        """Serve on ``channels``: start them, then delivery, retention and the heartbeat. Returns the names of
        the channels that started (one failing to start does not stop the others). A link's move that a
        stopped process left unfinished is finished first: the person is whole before anyone is answered."""
        await self.gate.refresh()
        await moves.finish_unfinished(self.db, functools.partial(move_person, self.db, self.person_data))
        left = await self.inbox.leftovers()  # before any channel takes a message in itself
        await self.model_client_loaded()
        started = await self.start_channels(channels)
        await self.start_delivery()
        self.start_retention()
        # Messages a previous process took in and did not answer are answered now (new ones wait until those
        # are queued).
        await self.router.resume(left, started)
        self.heartbeat, self.scheduler = await start_heartbeat(self)
        return started

    async def model_client_loaded(self) -> None:
        """Return once the model client has loaded or failed to for real (the model process's own attempts and
        timeout): no platform is polled before a message could be answered, so none waits seconds for litellm."""
        if self.warming is not None:
            await asyncio.wait([self.warming])  # its failure is logged where it happens, and the first reply retries

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
        """Stop serving, then close every part :func:`kith.app.wiring.build_app` opened (the database last)."""
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
            # Built: frozen now, while the model process may still be loading, not after, on the first poll's path.
            freeze_startup_heap()
            started = await self.start(channels)
            if started:
                control = await serve_control(self)
                if self.settings.web.enabled:  # Starlette and uvicorn are imported only then
                    self.web = await serve_web(self, control)
            yield started
        finally:
            if self.web is not None:
                await self.web.close()
                self.web = None
            if control is not None:
                await control.close()
            await self.close()


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


def freeze_startup_heap() -> None:
    """Keep the garbage collector off what start-up built to last (imported libraries, settings).

    Those objects never die, yet every full collection walked them all: pauses of up to 200 ms
    measured here, landing on whichever reply was under way. From here on the collector runs less
    often, too (``GC_THRESHOLDS``).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()  # off for the start (kith.app.run)


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
