"""The shapes of memory: a stored record, an extractor's proposal, and a transcript turn.

A :class:`MemoryRecord` is one durable fact about one person, with the receipts
(``evidence`` quotes and ``sources``) that justify it. :func:`to_metadata` flattens a
record into the flat ``str | int | float | bool`` dict Chroma accepts and
:func:`from_metadata` restores it exactly.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ground.tunables import (
    DEFAULT_IMPORTANCE,
    HORIZON_INTENTION_HOURS,
    HORIZON_ONE_OFF_DAYS,
)
from ground.types import utcnow

if TYPE_CHECKING:
    from memory.core.graph_records import RelationProposal

METADATA_SCHEMA_VERSION = 1

MetadataValue = str | int | float | bool


class MemoryKind(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    PROJECT = "project"
    GOAL = "goal"
    EPISODE = "episode"
    INSTRUCTION = "instruction"  # a standing instruction the person gave about themselves


class Scope(enum.StrEnum):
    """Where it was said: a private chat, or a chat other people can read."""

    DM = "dm"
    SHARED = "shared"


class Origin(enum.StrEnum):
    HEARD = "heard"  # the person said it
    READ = "read"  # kith read it in a message, page or file
    THOUGHT = "thought"  # kith concluded it
    DID = "did"  # an action kith took and its outcome


class Tier(enum.StrEnum):
    """Confidence that climbs as a memory is confirmed."""

    OBSERVATION = "observation"
    BELIEF = "belief"
    KNOWLEDGE = "knowledge"


class Status(enum.StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"  # a correction replaced it; kept for "how do you know?"
    RETIRED = "retired"  # decay or a lapsed horizon stamped valid_to
    FORGOTTEN = "forgotten"  # the person asked; a tombstone so imports cannot resurrect it


class Horizon(enum.StrEnum):
    """An extractor's hint about how long a memory should live."""

    LASTING = "lasting"
    ONE_OFF = "one_off"  # "no onions in tonight's order"
    INTENTION = "intention"  # "I'll call mum tomorrow"


class AuthorRole(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"
    COMMAND = "command"  # a slash command, not speech
    HEARTBEAT = "heartbeat"  # kith's own scheduled wake


@dataclass(frozen=True, slots=True)
class Source:
    """The message a memory's evidence was quoted from."""

    platform: str
    chat_id: str
    message_id: str
    timestamp: datetime
    medium: str = ""  # "voice": the words are a voice note's transcript


@dataclass(frozen=True, slots=True)
class Turn:
    """One transcript turn as the extractor and the validator see it.

    ``person`` is the id of the person who wrote a ``user`` turn, ``None`` for every other role.
    """

    author_role: AuthorRole
    person: str | None
    text: str
    platform: str
    chat_id: str
    message_id: str
    timestamp: datetime
    scope: Scope
    medium: str = ""  # how the words came ("voice": a transcript)


@dataclass(frozen=True, slots=True)
class MemoryCandidate:
    """A memory an extractor proposed, as it stands after validation.

    ``kind`` to ``horizon`` come from the model's JSON. ``sources`` and ``scope`` are never
    read from the model: validation fills them from the turns the evidence was found in.
    """

    kind: MemoryKind
    text: str
    evidence: tuple[str, ...]
    importance: float = DEFAULT_IMPORTANCE
    corrects: str | None = None  # id of the memory this one corrects
    horizon: Horizon | None = None
    sources: tuple[Source, ...] = ()
    scope: Scope = Scope.DM
    # The whole sentence each quote stands in, so a receipt shows what was said around the words quoted.
    evidence_sentences: tuple[str, ...] = ()
    # Who and what the fact names and how they connect, grounded in the same quotes (memory.graph).
    relations: tuple[RelationProposal, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()  # two names the quotes give one being


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One durable memory about one person."""

    id: str
    person: str
    kind: MemoryKind
    text: str
    evidence: tuple[str, ...]
    sources: tuple[Source, ...]
    scope: Scope
    origin: Origin = Origin.HEARD
    tier: Tier = Tier.OBSERVATION
    importance: float = DEFAULT_IMPORTANCE
    pinned: bool = False
    expires_at: datetime | None = None  # the horizon; None means it does not lapse
    status: Status = Status.ACTIVE
    valid_to: datetime | None = None  # when it stopped being current (retired/superseded)
    revision: int = 1  # bumped on every write, for compare-and-swap updates
    conflicts_with: tuple[str, ...] = ()
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    use_count: int = 0  # times a reply actually drew on it
    last_used_at: datetime | None = None
    # The whole sentences the evidence quotes stand in (may be empty: older records, /remember).
    evidence_sentences: tuple[str, ...] = ()

    def is_expired(self, now: datetime) -> bool:
        # Pins are deliberate: a horizon never lapses them.
        return not self.pinned and self.expires_at is not None and self.expires_at <= now

    def is_live(self, now: datetime) -> bool:
        """Whether recall and the gate should see it at ``now``."""
        return self.status is Status.ACTIVE and not self.is_expired(now)


def record_of(person: str, candidate: MemoryCandidate, memory_id: str, now: datetime, *,
              expires_at: datetime | None = None, conflicts_with: Sequence[str] = ()) -> MemoryRecord:
    """What ``candidate`` says about ``person`` as a new record (heard, an observation), with its receipts."""
    return MemoryRecord(
        id=memory_id,
        person=person,
        kind=candidate.kind,
        text=candidate.text,
        evidence=candidate.evidence,
        sources=candidate.sources,
        scope=candidate.scope,
        importance=candidate.importance,
        expires_at=expires_at,
        conflicts_with=tuple(conflicts_with),
        created_at=now,
        updated_at=now,
        evidence_sentences=candidate.evidence_sentences,
    )


def without_links(record: MemoryRecord, others: Collection[str], now: datetime) -> MemoryRecord:
    """``record`` no longer flagged as conflicting with ``others`` (``record`` itself when it was not)."""
    kept = tuple(i for i in record.conflicts_with if i not in others)
    if len(kept) == len(record.conflicts_with):
        return record
    return replace(record, conflicts_with=kept, updated_at=now)


def horizon_expiry(horizon: Horizon | None, now: datetime) -> datetime | None:
    """When a memory with this horizon hint lapses; ``None`` for lasting or no hint."""
    if horizon is Horizon.ONE_OFF:
        return now + timedelta(days=HORIZON_ONE_OFF_DAYS)
    if horizon is Horizon.INTENTION:
        return now + timedelta(hours=HORIZON_INTENTION_HOURS)
    return None


# --- Chroma metadata -----------------------------------------------------------------
# Every datetime is stored twice: an ISO string (exact, keeps the zone) that from_metadata
# reads, and a float epoch ``<name>_ts`` that Chroma's numeric $gt/$lt filters can use.
# Chroma cannot filter on a missing key, so "no value" is "" / 0.0 rather than absent.
_DATETIME_FIELDS = ("expires_at", "valid_to", "created_at", "updated_at", "last_used_at")


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else ""


def _epoch(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def _parse_iso(value: object) -> datetime | None:
    return datetime.fromisoformat(str(value)) if value else None


def _source_to_json(source: Source) -> dict[str, str]:
    data = {
        "platform": source.platform,
        "chat_id": source.chat_id,
        "message_id": source.message_id,
        "timestamp": source.timestamp.isoformat(),
    }
    if source.medium:
        data["medium"] = source.medium
    return data


def _source_from_json(data: Mapping[str, str]) -> Source:
    return Source(
        platform=data["platform"],
        chat_id=data["chat_id"],
        message_id=data["message_id"],
        timestamp=datetime.fromisoformat(data["timestamp"]),
        medium=str(data.get("medium") or ""),
    )


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def to_metadata(record: MemoryRecord) -> dict[str, MetadataValue]:
    """Flatten ``record`` into Chroma-compatible metadata (text included, so it is self-contained)."""
    metadata: dict[str, MetadataValue] = {
        "schema": METADATA_SCHEMA_VERSION,
        "id": record.id,
        "person": record.person,
        "kind": record.kind.value,
        "text": record.text,
        "evidence": _dumps(list(record.evidence)),
        "evidence_sentences": _dumps(list(record.evidence_sentences)),
        "sources": _dumps([_source_to_json(s) for s in record.sources]),
        "scope": record.scope.value,
        "origin": record.origin.value,
        "tier": record.tier.value,
        "importance": float(record.importance),
        "pinned": record.pinned,
        "status": record.status.value,
        "revision": record.revision,
        "conflicts_with": _dumps(list(record.conflicts_with)),
        "use_count": record.use_count,
    }
    for name in _DATETIME_FIELDS:
        value = getattr(record, name)
        metadata[name] = _iso(value)
        metadata[f"{name}_ts"] = _epoch(value)
    return metadata


def from_metadata(metadata: Mapping[str, MetadataValue]) -> MemoryRecord:
    """Rebuild the record :func:`to_metadata` flattened. Raises ``KeyError``/``ValueError`` on bad data."""
    schema = metadata.get("schema")
    if schema != METADATA_SCHEMA_VERSION:
        raise ValueError(f"unsupported memory metadata schema: {schema!r}")
    created_at = _parse_iso(metadata["created_at"])
    updated_at = _parse_iso(metadata["updated_at"])
    if created_at is None or updated_at is None:
        raise ValueError("memory metadata lacks created_at/updated_at")
    return MemoryRecord(
        id=str(metadata["id"]),
        person=str(metadata["person"]),
        kind=MemoryKind(metadata["kind"]),
        text=str(metadata["text"]),
        evidence=tuple(json.loads(str(metadata["evidence"]))),
        sources=tuple(_source_from_json(s) for s in json.loads(str(metadata["sources"]))),
        scope=Scope(metadata["scope"]),
        origin=Origin(metadata["origin"]),
        tier=Tier(metadata["tier"]),
        importance=float(metadata["importance"]),
        pinned=bool(metadata["pinned"]),
        expires_at=_parse_iso(metadata["expires_at"]),
        status=Status(metadata["status"]),
        valid_to=_parse_iso(metadata["valid_to"]),
        revision=int(metadata["revision"]),
        conflicts_with=tuple(json.loads(str(metadata["conflicts_with"]))),
        created_at=created_at,
        updated_at=updated_at,
        use_count=int(metadata["use_count"]),
        last_used_at=_parse_iso(metadata["last_used_at"]),
        # Absent from records written before it existed.
        evidence_sentences=tuple(json.loads(str(metadata.get("evidence_sentences") or "[]"))),
    )


def said_at(record: MemoryRecord) -> datetime:
    """When the person last said it: the newest source, else when it was stored."""
    return max((s.timestamp for s in record.sources), default=record.created_at)


def merged_candidate(earlier: MemoryCandidate, later: MemoryCandidate) -> MemoryCandidate:
    """``earlier`` with ``later``'s receipts added (quotes, sentences, sources): one fact said twice in one run.
    Said anywhere private, it stays private."""
    return replace(
        earlier,
        evidence=tuple(dict.fromkeys((*earlier.evidence, *later.evidence))),
        evidence_sentences=tuple(dict.fromkeys((*earlier.evidence_sentences, *later.evidence_sentences))),
        sources=tuple(dict.fromkeys((*earlier.sources, *later.sources))),
        scope=Scope.DM if Scope.DM in (earlier.scope, later.scope) else Scope.SHARED,
        importance=max(earlier.importance, later.importance),
        relations=tuple(dict.fromkeys((*earlier.relations, *later.relations))),
        aliases=tuple(dict.fromkeys((*earlier.aliases, *later.aliases))),
    )
