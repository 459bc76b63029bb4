"""Weekly decay: retire lapsed and stale memories by stamping an end date; never delete.

A memory is retired when its horizon has ended (a one-off preference after 30 days, an
intention after 72 hours; see :func:`memory.core.records.horizon_expiry`) or when it is stale: an
episode or project that was never confirmed, never used in a reply and untouched for
``decay_stale_days``. Stated timeless facts and preferences are never stale.

Never retired, whatever their horizon: pinned memories, the person's own instructions (kind
``instruction``), and anything sensitive: health, family, pets, money or distress (a keyword
list in English and Polish, plus ``heartbeat.sensitive_words`` for names).

Retiring is a compare-and-swap write through the store (status ``retired``, ``valid_to``
stamped), so a memory someone changed meanwhile is looked at again, not overwritten. Each run
is recorded, memory by memory, *before* the write, with the revision the write will produce;
``undo-decay`` puts back exactly the memories the last run retired and nobody touched since.
"""

from __future__ import annotations

import enum
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData, when
from heartbeat import memory_scan
from memory.core import MemoryKind, MemoryRecord, Status, Tier
from memory.store import MemoryStore, RevisionConflict

log = logging.getLogger("kith.decay")

STALE_KINDS = (MemoryKind.EPISODE, MemoryKind.PROJECT)

# A trailing "*" matches any ending ("dog*": dogs, doggo); otherwise the whole word. Conservative on
# purpose: a false match keeps a memory a little longer, a miss could retire someone's grief.
SENSITIVE_WORDS: dict[str, tuple[str, ...]] = {
    "health": (
        "health*", "doctor*", "hospital*", "clinic*", "sick*", "ill", "illness*", "disease*", "diagnos*",
        "medic*", "pill", "pills", "therap*", "surgery", "surgeon*", "cancer*", "tumor*", "tumour*", "diabet*",
        "asthma*", "allerg*", "pregnan*", "depress*", "anxiety", "anxious", "injur*", "disab*", "mental*", "psychiatr*",
        "vaccin*", "symptom*", "migraine*", "chronic", "heart attack", "stroke",
        "zdrow*", "lekarz*", "lekarstw*", "lek", "leki", "leków", "szpital*", "chor*", "przychodni*", "diagnoz*",
        "terapi*", "terapeut*", "nowotw*", "rak", "raka", "cukrzyc*", "astm*", "alergi*", "uczuleni*", "ciąż*",
        "depresj*", "lęk*", "ból*", "boli", "psychiatr*", "szczepi*", "tabletk*", "niepełnospraw*",
    ),
    "family": (
        "family", "families", "famil*", "mother*", "mum", "mums", "mom", "moms", "mommy", "mummy", "father*",
        "dad", "dads", "daddy", "parent*", "son", "sons", "daughter*", "brother*", "sister*", "sibling*", "wife",
        "wives", "husband*", "partner*", "grandm*", "grandf*", "grandp*", "grandparent*", "grandchild*", "grandson*",
        "granddaughter*", "aunt*", "uncle*", "cousin*", "niece*", "nephew*", "child", "children", "kid", "kids",
        "baby", "babies", "fianc*", "boyfriend*", "girlfriend*",
        "rodzin*", "mama", "mamy", "mamie", "mamą", "mamę", "mamo", "mamus*", "matk*", "matce", "ojc*", "ojciec",
        "tata", "taty", "tacie", "tatą", "tatę", "tato", "tatus*", "rodzic*", "syn", "syna", "synem", "synowi",
        "synu", "synowie", "synów", "córk*", "córce", "brat", "brata", "bratem", "bratu", "braci*", "siostr*",
        "żon*", "mąż", "męża", "mężem", "mężowi", "mężu", "dziadk*", "dziadek", "babci*", "babcia", "wnuk*",
        "wnucz*", "ciot*", "wujk*", "wujek", "kuzyn*", "dzieck*", "dzieci*", "niemowl*", "narzeczon*",
        "chłopak*", "dziewczyn*",
    ),
    "pets": (
        "pet", "pets", "dog*", "pupp*", "cat", "cats", "kitten*", "kitty", "vet", "vets", "veterinar*",
        "hamster*", "rabbit*", "bunny", "bunnies", "parrot*", "budgie*", "guinea pig*", "aquarium*", "horse*",
        "pony", "ponies", "tortoise*", "turtle*", "ferret*",
        "pies", "psa", "psem", "psu", "psie", "psy", "psów", "piesek*", "pieska*", "psiak*", "szczeni*", "kot",
        "kota", "kotem", "kotu", "kocie", "koty", "kotów", "kotek*", "kotk*", "kici*", "zwierzak*", "zwierzą*",
        "zwierzęt*", "weterynarz*", "chomik*", "królik*", "papug*", "rybk*", "akwarium", "koń", "konia", "koni*",
        "żółw*",
    ),
    "money": (
        "money", "debt*", "loan*", "mortgage*", "salar*", "wage*", "income*", "rent", "rents", "bank*",
        "saving*", "budget*", "bill", "bills", "invoice*", "tax", "taxes", "pension*", "bankrupt*", "credit*",
        "financ*", "payment*", "paycheck*", "owe", "owes", "owed", "afford*",
        "pieniąd*", "pieniędz*", "kasa", "kasy", "kasę", "dług*", "kredyt*", "pożycz*", "hipotek*", "pensj*",
        "wypłat*", "zarob*", "czynsz*", "oszczędn*", "budżet*", "rachun*", "faktur*", "podat*", "emerytur*",
        "zapłac*", "płac*", "bankructw*",
    ),
    "distress": (
        "suicid*", "self-harm*", "selfharm*", "kill myself", "hurt myself", "grief", "griev*", "funeral*",
        "died", "death*", "passed away", "crisis", "abuse*", "abusive", "panic*", "trauma*", "lonely",
        "loneliness", "hopeless*",
        "samobój*", "żałob*", "pogrzeb*", "zmarł*", "umarł*", "śmier*", "kryzys*", "przemoc*", "samotn*",
        "panik*", "traum*", "rozpacz*",
    ),
}


def _pattern(entries: Iterable[str]) -> re.Pattern[str]:
    parts = []
    for entry in entries:
        entry = entry.strip().casefold()
        if not entry:
            continue
        prefix = entry.endswith("*")
        body = r"\s+".join(re.escape(w) for w in entry.rstrip("*").split())
        parts.append(body + (r"\w*" if prefix else "") + r"(?!\w)")
    return re.compile(r"(?<!\w)(?:" + "|".join(parts or ["(?!)"]) + ")")


class SensitiveTopics:
    """The keyword rule: which topic (if any) a text touches."""

    def __init__(self, extra_words: Sequence[str] = ()) -> None:
        self._topics = {topic: _pattern(words) for topic, words in SENSITIVE_WORDS.items()}
        if extra_words:
            self._topics["named"] = _pattern(extra_words)

    def topic(self, text: str) -> str | None:
        folded = text.casefold()
        return next((topic for topic, p in self._topics.items() if p.search(folded)), None)


class Reason(enum.StrEnum):
    EXPIRED = "expired"
    STALE = "stale"


# --- pure rules -----------------------------------------------------------------------------------
def retire_reason(record: MemoryRecord, now: datetime, stale_before: datetime) -> Reason | None:
    """Why decay would retire this memory, before the protections are considered."""
    if record.status is not Status.ACTIVE:
        return None
    if record.expires_at is not None and record.expires_at <= now:
        return Reason.EXPIRED
    if (record.expires_at is None and record.kind in STALE_KINDS and record.tier is Tier.OBSERVATION
            and record.use_count == 0 and record.updated_at < stale_before):
        return Reason.STALE
    return None


def protection(record: MemoryRecord, topics: SensitiveTopics) -> str | None:
    """Why decay must keep this memory whatever its horizon: pinned, instruction, or a sensitive topic."""
    if record.pinned:
        return "pinned"
    if record.kind is MemoryKind.INSTRUCTION:
        return "instruction"
    topic = topics.topic(" ".join((record.text, *record.evidence)))
    return f"sensitive_{topic}" if topic else None


# --- relational access --------------------------------------------------------------------------
decay_runs = sa.Table(
    "decay_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("started_at", UtcDateTime(), nullable=False),
    sa.Column("finished_at", UtcDateTime(), nullable=True),
    sa.Column("retired", sa.Integer, nullable=False, server_default="0"),
    sa.Column("undone_at", UtcDateTime(), nullable=True),
)

decay_retirements = sa.Table(
    "decay_retirements",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("decay_runs.id"), nullable=False, index=True),
    sa.Column("memory_id", sa.String(64), nullable=False),
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("reason", sa.String(16), nullable=False),
    sa.Column("prev_status", sa.String(16), nullable=False),
    sa.Column("prev_valid_to", UtcDateTime(), nullable=True),
    sa.Column("prev_updated_at", UtcDateTime(), nullable=False),
    sa.Column("revision_after", sa.Integer, nullable=False),  # what the retiring write produces
)


def retirements_of(conn: Connection, person: str) -> list[dict[str, str | None]]:
    """What decay retired of the person's, and whether it was undone, as their export lists it."""
    r_, run = decay_retirements, decay_runs
    rows = conn.execute(sa.select(r_.c.memory_id, r_.c.reason, r_.c.prev_status, run.c.started_at, run.c.undone_at)
                        .select_from(r_.join(run, run.c.id == r_.c.run_id)).where(r_.c.person == person)
                        .order_by(r_.c.id)).all()
    return [{"memory": r.memory_id, "reason": r.reason, "previous_status": r.prev_status,
             "retired_at": when(r.started_at), "undone_at": when(r.undone_at)} for r in rows]


DECAY_DATA = PersonData(
    "decay", tables=(decay_retirements, decay_runs), export_rows=retirements_of,
    stays="what a run retired and how to undo it, under the person of the time (the memories themselves move)",
    kept_by_forget="memory ids, reasons and times; no words")


def _start_run(conn: Connection, now: datetime) -> int:
    return int(conn.execute(decay_runs.insert().values(started_at=now)).inserted_primary_key[0])


def _finish_run(conn: Connection, run_id: int, retired: int, now: datetime) -> None:
    conn.execute(decay_runs.update().where(decay_runs.c.id == run_id).values(finished_at=now, retired=retired))


def _intend(conn: Connection, run_id: int, record: MemoryRecord, reason: Reason) -> int:
    return int(conn.execute(decay_retirements.insert().values(
        run_id=run_id, memory_id=record.id, person=record.person, reason=reason.value,
        prev_status=record.status.value, prev_valid_to=record.valid_to, prev_updated_at=record.updated_at,
        revision_after=record.revision + 1)).inserted_primary_key[0])


def _drop_intent(conn: Connection, intent_id: int) -> None:
    conn.execute(decay_retirements.delete().where(decay_retirements.c.id == intent_id))


@dataclass(frozen=True, slots=True)
class _Retirement:
    memory_id: str
    prev_status: Status
    prev_valid_to: datetime | None
    prev_updated_at: datetime
    revision_after: int


def _last_run(conn: Connection, before: int | None = None) -> tuple[int, bool, list[_Retirement]] | None:
    """The last run not undone (before run ``before``) that recorded a retirement: its id, whether it finished,
    and what it recorded."""
    # A pass that retired nothing (the weekly one with nothing due, or a "decay --now" that waited behind the
    # bot's own pass) is not what an operator means to reverse: undo reaches past it to the last pass that did.
    retired_any = sa.exists().where(decay_retirements.c.run_id == decay_runs.c.id)
    query = sa.select(decay_runs.c.id, decay_runs.c.finished_at).where(decay_runs.c.undone_at.is_(None), retired_any)
    if before is not None:
        query = query.where(decay_runs.c.id < before)
    run = conn.execute(query.order_by(decay_runs.c.id.desc()).limit(1)).first()
    if run is None:
        return None
    rows = conn.execute(sa.select(decay_retirements).where(decay_retirements.c.run_id == run.id)
                        .order_by(decay_retirements.c.id)).all()
    return int(run.id), run.finished_at is not None, [
        _Retirement(r.memory_id, Status(r.prev_status), r.prev_valid_to, r.prev_updated_at, r.revision_after)
        for r in rows]


def _mark_undone(conn: Connection, run_id: int, now: datetime) -> None:
    conn.execute(decay_runs.update().where(decay_runs.c.id == run_id).values(undone_at=now))


# --- the runs ----------------------------------------------------------------------------------------
@dataclass
class DecayReport:
    run_id: int = 0
    examined: int = 0
    retired: Counter[str] = field(default_factory=Counter)  # by reason
    kept: Counter[str] = field(default_factory=Counter)  # by protection
    lost_races: int = 0  # changed by someone else while decay looked at it, and no longer due

    @property
    def retired_total(self) -> int:
        return sum(self.retired.values())


@dataclass
class UndoReport:
    run_id: int | None = None
    restored: int = 0
    changed_since: int = 0  # retired by that run but written to since: left as they are


class Decay:
    def __init__(self, db: Database, store: MemoryStore, clock: Callable[[], datetime], *, stale_days: int,
                 sensitive_words: Sequence[str] = ()) -> None:
        self.db = db
        self.store = store
        self.clock = clock
        self.stale_days = stale_days
        self.topics = SensitiveTopics(sensitive_words)

    async def run(self) -> DecayReport:
        now = self.clock()
        stale_before = now - timedelta(days=self.stale_days)
        report = DecayReport(run_id=await self.db.run(_start_run, now))
        found = await memory_scan.expired(self.store, now)
        found += await memory_scan.stale(self.store, stale_before, STALE_KINDS)
        for record in {r.id: r for r in found}.values():
            report.examined += 1
            reason = retire_reason(record, now, stale_before)
            if reason is None:
                continue
            kept = protection(record, self.topics)
            if kept is not None:
                report.kept[kept] += 1
                continue
            retired = await self._retire(report.run_id, record.id, now, stale_before)
            if retired is None:
                report.lost_races += 1
            else:
                report.retired[retired.value] += 1
        await self.db.run(_finish_run, report.run_id, report.retired_total, self.clock())
        log.info("decay run=%d examined=%d retired=%s kept=%s lost_races=%d", report.run_id, report.examined,
                 dict(report.retired), dict(report.kept), report.lost_races)
        return report

    async def _retire(self, run_id: int, memory_id: str, now: datetime, stale_before: datetime) -> Reason | None:
        reason: Reason | None = None
        intent: int | None = None

        async def retired(current: MemoryRecord) -> MemoryRecord | None:
            nonlocal reason, intent
            if intent is not None:  # the write it was recorded for lost its race: it never happened
                await self.db.run(_drop_intent, intent)
                intent = None
            reason = retire_reason(current, now, stale_before)
            if reason is None or protection(current, self.topics) is not None:
                return None  # someone pinned, confirmed or re-dated it meanwhile
            intent = await self.db.run(_intend, run_id, current, reason)
            return replace(current, status=Status.RETIRED, valid_to=now, updated_at=now)

        try:
            stored = await self.store.edit(memory_id, retired)
        except RevisionConflict:  # lost every race: looked at again next week
            stored = None
        if stored is None:
            if intent is not None:
                await self.db.run(_drop_intent, intent)
            return None
        return reason

    async def undo_last(self) -> UndoReport:
        """Put back what the last run (not undone yet) retired, unless it was written to since."""
        before = None
        while True:
            last = await self.db.run(_last_run, before)
            if last is None:
                return UndoReport()
            run_id, finished, retirements = last
            current = {r.memory_id: await self.store.get_memory(r.memory_id) for r in retirements}
            # A pass killed between recording a retirement and writing it left the record of a write that never
            # happened (the memory's revision never reached the one recorded). One that died before any write
            # landed retired nothing: reach past it, as past an empty pass. It is left as it is, not marked
            # undone: on a database shared with another machine it may be a pass still running there.
            if not finished and all(_never_written(current[r.memory_id], r) for r in retirements):
                before = run_id
                continue
            break
        report = UndoReport(run_id=run_id)
        for r in retirements:
            record = current[r.memory_id]
            if record is not None and _never_written(record, r):
                continue  # the pass died before retiring it: nothing to put back, nothing changed
            if await self.store.edit(r.memory_id, partial(_restored, r)) is None:
                report.changed_since += 1  # gone, or touched since
            else:
                report.restored += 1
        await self.db.run(_mark_undone, run_id, self.clock())
        log.info("decay undone run=%d restored=%d changed_since=%d", run_id, report.restored, report.changed_since)
        return report


def _restored(retirement: _Retirement, record: MemoryRecord) -> MemoryRecord | None:
    """``record`` as it was before ``retirement``; None (left as it is) when it was written to since."""
    if record.status is not Status.RETIRED or record.revision != retirement.revision_after:
        return None
    return replace(record, status=retirement.prev_status, valid_to=retirement.prev_valid_to,
                   updated_at=retirement.prev_updated_at)


def _never_written(record: MemoryRecord | None, retirement: _Retirement) -> bool:
    """Whether the retiring write ``retirement`` records never happened: every write moves the revision on by
    one, and this one would have made it ``revision_after``. A memory gone since (forgotten) cannot tell."""
    return record is not None and record.revision < retirement.revision_after
