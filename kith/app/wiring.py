"""Wiring: build the parts of a running kith from settings (:func:`build_app`). No decisions live here; what the
app does once built is :mod:`kith.app.lifecycle`'s."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime

from conversation.chat_commands import ChatCommands
from conversation.core import ConversationCore
from conversation.linking import Linker
from conversation.memory_commands import MemoryCommands, QuestionSender
from conversation.router import Previewing, Router
from delivery.inbound import Cursors, InboundJournal
from delivery.inbox import Inbox
from delivery.previews import PreviewBook
from delivery.rate_gate import RateGate
from delivery.worker import DeliveryWorker
from ground.background import BackgroundTasks, on_daemon_thread
from ground.config import Settings
from ground.db import Database
from ground.migration import refuse_half_migrated
from ground.person_data import move_person
from ground.private_files import tighten
from ground.types import Channel, utcnow
from heartbeat.settings import resolve_timezone
from kith.app.lifecycle import App, load_model_client
from kith.app.model_start import new_model_process
from kith.app.person_data import gathered
from kith.app.person_export import PersonExport
from kith.app.schema import create_schema
from kith.settings import PLATFORMS
from llm.client import LLMClient, LLMError
from llm.process import ModelProcess
from media.reader import MediaReader
from memory.controls import MemoryControls, PauseBook, QuestionBook
from memory.core import read_lemma_dictionaries
from memory.documents import DocsCommand, DocumentBook, DocumentPassages, DocumentsInContext
from memory.encoders import open_reranker
from memory.goals import GoalBook, GoalsCommand, GoalsInContext
from memory.recall import RecallEngine, RecallMemoryContext, RecallTool, UseRecorder
from memory.service import MemoryService
from persona.instructions import MEMORY_CONTROLS_HINT
from policy.gate import PolicyGate
from policy.settings import PolicySettings


class NotGiven:
    """build_app's default for ``model_process`` (None means: no model process)."""


NOT_GIVEN = NotGiven()


def open_database(settings: Settings) -> Database:
    settings.storage.data_path().mkdir(parents=True, exist_ok=True)
    tighten(settings.storage.data_path())  # made by an older kith, or under a looser umask
    db = Database(settings.storage.resolved_database_url())
    try:
        db.run_sync(refuse_half_migrated)  # before anything is written into a copy still under way
    except BaseException:
        db.close()
        raise
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
    # The support rules' lemma dictionaries take seconds of CPU to read, holding the interpreter's lock: read them
    # while the rest is built (mostly waiting on files and the model process), and before anything is served.
    lemmas_read = on_daemon_thread(read_lemma_dictionaries, name="lemmas-read") if settings.memory.capture else None
    pauses = PauseBook(db)
    await pauses.load()
    memory = await MemoryService.open(settings, db, llm, clock=clock, is_paused=pauses.is_paused)
    # Only the prompt's and the tool's recall reorders by the cross-encoder; commands that act rank by matching
    # alone, so the model is loaded here, not with memory (operator commands never load it).
    reranker, _status = await open_reranker(settings.memory.reranker)
    recall = RecallEngine(memory.store, settings.recall, clock, reranker=reranker, graph=memory.graph)
    goals = GoalBook(db, clock, resolve_timezone(settings.heartbeat.timezone))
    documents = DocumentBook(db, memory.store.vector_source, clock, background)
    # Building every person's lexical index takes seconds on a large store: never on a reply's path.
    background.spawn(memory.store.indexes.warm(), name="memory-warm")
    background.spawn(goals.warm(), name="goals-warm")
    questions = QuestionBook(db, clock)
    channels: dict[str, Channel] = {}
    rate_gate = RateGate()  # one per chat, shared by the replies' previews and their final sends
    worker = DeliveryWorker(db, channels, gate.may_send, settings=settings.delivery, clock=clock, gate=rate_gate)
    question_sender = QuestionSender(db=db, memory=memory, book=questions, outbound=worker, clock=clock)
    core = ConversationCore(
        settings=settings, db=db, llm=llm, clock=clock, background=background,
        memory=GoalsInContext(
            DocumentsInContext(RecallMemoryContext(recall, settings.recall, settings.budget), documents,
                               recall.queries, settings.recall, settings.budget.documents_chars),
            goals, settings.budget.goals_chars),
        # The memory service's observer is there capture on or off: a reply written while a forget landed
        # loses the words there too.
        observers=[UseRecorder(memory.store, clock), memory.observer, question_sender],
        tools=[RecallTool(recall, settings.recall, memory.graph,
                          DocumentPassages(documents, recall.queries, settings.recall))],
        persona_notes=[MEMORY_CONTROLS_HINT],
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
    commands.register("docs", DocsCommand.description, DocsCommand(documents))
    memory_commands = MemoryCommands(db=db, controls=controls, sender=question_sender, clock=clock)
    memory_commands.register(commands)
    inbox = Inbox(db, clock=clock)
    journal = InboundJournal(db, clock=clock, inbox=inbox)
    router = Router(core, channels, worker, gate, journal, debounce_s=settings.delivery.debounce_ms / 1000,
                    typing_refresh_s=settings.delivery.typing_refresh_s,
                    typing_delay_s=settings.delivery.typing_delay_s, commands=commands, buttons=commands.press,
                    pending=memory_commands.answer_if_pending, kept=inbox,
                    previewing=Previewing(frozenset(settings.delivery.stream), rate_gate,
                                          settings.delivery.stream_gap_s, settings.delivery.stream_give_up_s,
                                          PreviewBook(db, clock)),
                    media=MediaReader(settings.media, llm, documents))
    if lemmas_read is not None:
        await lemmas_read
    return App(settings=settings, db=db, llm=llm, core=core, background=background, gate=gate, journal=journal,
               inbox=inbox, cursors=Cursors(db), commands=commands, worker=worker, router=router, memory=memory,
               linker=linker, recall=recall, question_sender=question_sender, memory_commands=memory_commands,
               person_data=person_data, channels=channels, clock=clock, model_process=model_process, warming=warming)

