"""What each page shows, read from the running bot's own parts: plain dataclasses the templates render.

Every read goes through the same calls the operator commands and chat commands make (the memory service,
the person's listing as ``/memory`` builds it, the people directory, the pairing state, doctor's store
checks on the bot's own stores); nothing here opens a store. The writes are in :mod:`kith.web.actions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from delivery.inbox import inbox as inbox_table
from delivery.outbox import outbox as outbox_table
from ground.checks import CheckResult
from ground.types import printable_name
from kith.web.rules import Paged, may_show, paged
from memory.controls import Listed, Requester, notes_in_use, said_matching
from memory.core import MemoryRecord, person_facing, said_at, said_of, words_of
from people import directory
from policy import store
from policy.pairing import list_pending

if TYPE_CHECKING:
    from kith.control.parts import Parts
    from kith.web.bot import Bot

OPERATOR = "web:operator"  # the account the page acts under, as the person's own controls record it
LAST_ERRORS = 5


def operator_for(person: str) -> Requester:
    """The operator tending ``person``'s memory from the page: the person's own controls, on their behalf."""
    return Requester(person, OPERATOR)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "-"


# --- the overview -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    warn: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Failed:
    id: int
    platform: str
    status: str
    error: str
    at: str


@dataclass(frozen=True, slots=True)
class Overview:
    checks: list[Check]
    platforms: list[str]
    inbox: int
    outbox: int
    errors: list[Failed]
    next_runs: list[tuple[str, str]]


def _delivery_counts(conn: sa.Connection) -> tuple[int, int, list[Failed]]:
    waiting_in = conn.execute(sa.select(sa.func.count()).select_from(inbox_table)).scalar_one()
    waiting_out = conn.execute(sa.select(sa.func.count()).select_from(outbox_table)
                               .where(outbox_table.c.status == "pending")).scalar_one()
    rows = conn.execute(sa.select(outbox_table.c.id, outbox_table.c.platform, outbox_table.c.status,
                                  outbox_table.c.last_error, outbox_table.c.updated_at)
                        .where(outbox_table.c.last_error.is_not(None))
                        .order_by(outbox_table.c.updated_at.desc()).limit(LAST_ERRORS)).all()
    return int(waiting_in), int(waiting_out), [Failed(r.id, r.platform, r.status, r.last_error, when(r.updated_at))
                                               for r in rows]


async def overview(app: Bot, parts: Parts) -> Overview:
    """``doctor``'s checks the bot runs on itself (the config it loaded, and the database, memory store and embedder
    as it has them open: what ``doctor`` asks a running bot for), the platforms, the delivery queues and the
    heartbeat's next runs."""
    results = [CheckResult("config", True, app.settings.source), *await parts.store_checks()]
    checks = [Check(r.name, r.ok, r.warn, r.detail) for r in results]
    inbox, outbox, errors = await app.db.run(_delivery_counts)
    runs = []
    if app.scheduler is not None:
        runs = sorted((job.name or job.id, when(job.next_run_time)) for job in app.scheduler.jobs()
                      if job.next_run_time is not None)
    return Overview(checks, sorted(app.channels), inbox, outbox, errors, runs)


# --- people and pairing ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Pending:
    code: str
    account: str
    expires: str


@dataclass(frozen=True, slots=True)
class Person:
    id: str
    accounts: list[str]
    name: str


@dataclass(frozen=True, slots=True)
class People:
    people: list[Person]
    pending: list[Pending]
    approved: list[str]
    owner: str | None


async def people(app: Bot) -> People:
    """Everyone kith knows with their accounts, and the pairing state ``bot.py pairing list`` reads."""
    rows = await app.db.run(directory.all_accounts)
    persons: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for row in rows:
        persons.setdefault(row.person, []).append(row.account)
        if row.display_name and row.person not in names:
            names[row.person] = printable_name(row.display_name)
    access, _revision = await app.db.run(store.load)
    now = app.clock()
    pending = [Pending(p.code, p.account, when(p.expires_at)) for p in list_pending(access, now)]
    approved = sorted(access.approved | ({access.owner} if access.owner else set()))
    return People([Person(p, accounts, names.get(p, "")) for p, accounts in persons.items()], pending, approved,
                  access.owner)


# --- one person ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Said:
    """Where and when the person said it."""

    platform: str
    chat: str
    at: str
    voice: bool


@dataclass(frozen=True, slots=True)
class Shown:
    """One memory as the page shows it: the person's words first, kith's label under them."""

    id: str
    kind: str
    status: str
    scope: str
    pinned: bool
    unreviewed: bool
    said: str  # who said it, when and where, as every listing words it
    sentences: tuple[str, ...]
    label: str
    sources: tuple[Said, ...]
    conflicts_with: tuple[str, ...]


def shown(record: MemoryRecord, name: str, *, unreviewed: bool = False) -> Shown:
    words = words_of(record)
    sources = tuple(Said(s.platform, s.chat_id, when(s.timestamp), s.medium == "voice") for s in record.sources)
    return Shown(record.id, record.kind.value, record.status.value, record.scope.value, record.pinned, unreviewed,
                 said_of(words, name or "they", unreviewed=unreviewed), words.sentences,
                 person_facing(record.text, you=False, name=name), sources, record.conflicts_with)


@dataclass(frozen=True, slots=True)
class Conflict:
    first: Shown
    second: Shown


@dataclass(frozen=True, slots=True)
class GoalShown:
    number: int
    text: str
    status: str
    due: str


@dataclass(frozen=True, slots=True)
class DocumentShown:
    number: int
    name: str
    kind: str
    pages: int
    shared: str
    platform: str


@dataclass(frozen=True, slots=True)
class PersonPage:
    id: str
    name: str
    accounts: list[str]
    memories: list[Shown]
    page: Paged
    conflicts: list[Conflict] = field(default_factory=list)
    goals: list[GoalShown] = field(default_factory=list)
    documents: list[DocumentShown] = field(default_factory=list)
    every: bool = False  # the superseded and retired memories listed too


async def name_of(app: Bot, person: str) -> str:
    accounts = await app.db.run(directory.accounts_of, person)
    return next((n for n in (printable_name(a.display_name) for a in accounts) if n), "")


async def known(app: Bot, person: str) -> bool:
    return bool(await app.db.run(directory.accounts_of, person))


async def person_page(app: Bot, person: str, page: int, size: int, *, every: bool = False) -> PersonPage:
    """``person``'s memories as ``/memory`` lists them (newest first, the staged notes already in use among them),
    one page of them, with their open conflicts side by side and their goals. ``every``: the superseded and retired
    ones too, as ``memory list --all`` lists them (read from the store: slower for someone with thousands)."""
    from memory.goals import of_person as goals_of

    accounts = [a.account for a in await app.db.run(directory.accounts_of, person)]
    name = await name_of(app, person)
    listed = [entry for entry in await listing(app, person) if may_show(entry.record.person, person)]
    live = [e.record for e in listed if not e.unreviewed]
    if every:
        notes = [e for e in listed if e.unreviewed]
        listed = sorted([*notes, *(Listed(r) for r in await app.memory.list_memories(person, include_inactive=True)
                                   if may_show(r.person, person))],
                        key=lambda e: (said_at(e.record), e.record.id), reverse=True)
    window = paged(len(listed), page, size)
    memories = [shown(e.record, name, unreviewed=e.unreviewed) for e in listed[window.start:window.stop]]
    goals = [GoalShown(g.number, g.text, g.status.value, str(g.due or ""))
             for g in await app.db.run(goals_of, person)]
    return PersonPage(person, name, accounts, memories, window, conflicts(live, person, name), goals,
                      await documents(app, person), every)


async def documents(app: Bot, person: str) -> list[DocumentShown]:
    """The documents the person shared, as their export lists them (the same read ``/export`` makes)."""
    from memory.documents import DOCUMENTS_DATA

    assert DOCUMENTS_DATA.export_rows is not None
    rows: list[dict[str, Any]] = await app.db.run(DOCUMENTS_DATA.export_rows, person)
    return [DocumentShown(r["number"], r["name"], r["kind"], len(r["pages"]), str(r["shared_at"] or ""),
                          (r.get("source") or {}).get("platform", "")) for r in rows]


async def listing(app: Bot, person: str) -> list[Listed]:
    """What ``/memory`` lists (:meth:`memory.controls.MemoryControls.listing`): the person's live memories and the
    staged notes recall already uses, newest first. Read from the active memories the store keeps in memory
    (:meth:`memory.service.MemoryService.active_memories`): the listing's own read of every memory from the store
    took 1.5 s for a person with 10,000 of them, this 20 ms."""
    now = app.clock()
    entries = [Listed(r) for r in await app.memory.active_memories(person) if r.is_live(now)]
    entries += [Listed(n.record, unreviewed=True) for n in await notes_in_use(app.memory, person, now)]
    return sorted(entries, key=lambda e: (said_at(e.record), e.record.id), reverse=True)


def conflicts(records: list[MemoryRecord], person: str, name: str) -> list[Conflict]:
    """Each pair of ``records`` (the person's live memories) flagged as contradicting each other, the earlier said
    first."""
    live = {r.id: r for r in records}
    pairs: list[Conflict] = []
    seen: set[frozenset[str]] = set()
    for record in live.values():
        for other_id in record.conflicts_with:
            other = live.get(other_id)
            key = frozenset((record.id, other_id))
            if other is None or key in seen or not may_show(other.person, person):
                continue
            seen.add(key)
            first, second = sorted((record, other), key=lambda r: (said_at(r), r.id))
            pairs.append(Conflict(shown(first, name), shown(second, name)))
    return pairs


# --- search ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Hit:
    memory: Shown
    why: str  # "their words match", or recall's score


@dataclass(frozen=True, slots=True)
class Found:
    query: str
    hits: list[Hit]
    note: str  # why only keywords were searched, when so


async def search(app: Bot, person: str, query: str, limit: int) -> Found:
    """What ``memory search`` finds (:func:`kith.operator.memory_cli.search_body`): the person's own words that hold
    the query first, then the memories recall ranks for it, in recall's order
    (:meth:`memory.service.MemoryService.search`)."""
    service = app.memory
    name = await name_of(app, person)
    said = [e for e in (await said_matching(service, person, query, service.clock()))[:limit]
            if may_show(e.record.person, person)]
    result = await service.search(person, query, limit)
    room = max(0, limit - len(said))
    ranked = [h for h in result.hits if all(h.record.id != e.record.id for e in said)
              and may_show(h.record.person, person)][:room]
    hits = [Hit(shown(e.record, name, unreviewed=e.unreviewed), "their words match") for e in said]
    hits += [Hit(shown(h.record, name), f"score {h.score:.2f}") for h in ranked]
    return Found(query, hits, f"keyword search only ({result.reason})" if result.lexical_only else "")
