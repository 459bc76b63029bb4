"""Where documents are kept: the ``documents`` and ``document_passages`` tables, and :class:`DocumentBook`.

A document is kept whole (its text, redacted, page by page) and as passages (:mod:`memory.documents.passages`),
each with the embedder's vector when there is one. Each document keeps the number it was given (``/docs forget
2`` means the same document whatever happened to the others). It is keyed by the message and file it came in, so
a message read twice (a turn retried, or taken up again after a crash) keeps it once.

Passages are embedded after the document is kept, in the background (:meth:`DocumentBook.keep`). A person's
passages are searched in memory, with the same two indexes as their memories (BM25 over the words, an
exact cosine table over the vectors), built on first use and built again when the person's documents changed,
in any process: every search first reads a fingerprint of their documents, one small query.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ground.background import BackgroundTasks
from ground.db import Database, UtcDateTime, metadata
from ground.person_data import PersonData, when
from ground.tunables import (
    DOCUMENT_CHUNK_CHARS,
    DOCUMENT_CHUNK_OVERLAP_CHARS,
    DOCUMENT_EMBED_BATCH,
    DOCUMENTS_MAX_PER_PERSON,
)
from memory.core.bm25 import BM25Index, normalize_scores
from memory.core.records import Scope
from memory.core.vector_table import VectorTable
from memory.documents.passages import Passage, passages
from memory.forgetting import DOCUMENT_PASSAGES, DOCUMENTS
from memory.store.vectors import HASH_SPACE, VectorSource
from people import directory

log = logging.getLogger("kith.memory.documents")

DOCUMENTS_TOPIC = DOCUMENTS  # Database.mark topic of writes to documents (a forget deletes them too, and marks it)
PAGE_BREAK = "\f"  # between pages in a document's kept text

documents = sa.Table(
    DOCUMENTS,
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),  # the message and file it came in (document_key)
    sa.Column("person", sa.String(64), nullable=False),
    sa.Column("number", sa.Integer, nullable=False),  # the person's own numbering, also the order
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # "text", "markdown", "pdf"
    sa.Column("pages", sa.Integer, nullable=False),
    sa.Column("chars", sa.Integer, nullable=False),
    sa.Column("text", sa.Text, nullable=False),  # the whole text, redacted, pages joined by PAGE_BREAK
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("chat_id", sa.String(200), nullable=False),
    sa.Column("message_id", sa.String(200), nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.Column("embedded", sa.Integer, nullable=False, server_default="0"),  # passages with a vector (any space)
    sa.UniqueConstraint("person", "number", name="uq_documents_person_number"),
)

document_passages = sa.Table(
    DOCUMENT_PASSAGES,
    metadata,
    sa.Column("document_id", sa.String(200), nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("page", sa.Integer, nullable=False),
    sa.Column("heading", sa.Text, nullable=False, server_default=""),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=True),  # float32, of ``space``; None: not embedded yet
    sa.Column("space", sa.String(200), nullable=True),
    sa.PrimaryKeyConstraint("document_id", "idx", name="pk_document_passages"),
)


def document_key(platform: str, chat_id: str, message_id: str, index: int) -> str:
    """A document's id: the message it came in, and which of its files."""
    return f"{platform}:{chat_id}:{message_id}:{index}"


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    person: str
    number: int
    name: str
    kind: str
    pages: int
    chars: int
    passages: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PassageHit:
    """One passage that matched a query, with what its relevance is made of."""

    document: Document
    passage: Passage
    cosine: float | None
    bm25: float


def _document(r: sa.Row, passage_count: int) -> Document:
    return Document(r.id, r.person, r.number, r.name, r.kind, r.pages, r.chars, passage_count, r.created_at)


# --- relational access ---------------------------------------------------------------------
def _counts(conn: Connection, ids: Sequence[str]) -> dict[str, int]:
    if not ids:
        return {}
    rows = conn.execute(sa.select(document_passages.c.document_id, sa.func.count())
                        .where(document_passages.c.document_id.in_(ids))
                        .group_by(document_passages.c.document_id)).all()
    return {r[0]: int(r[1]) for r in rows}


def of_person(conn: Connection, person: str) -> list[Document]:
    rows = conn.execute(sa.select(documents).where(documents.c.person == person)
                        .order_by(documents.c.number)).all()
    counts = _counts(conn, [r.id for r in rows])
    return [_document(r, counts.get(r.id, 0)) for r in rows]


def by_id(conn: Connection, document_id: str) -> Document | None:
    row = conn.execute(sa.select(documents).where(documents.c.id == document_id)).first()
    return None if row is None else _document(row, _counts(conn, [row.id]).get(row.id, 0))


def insert(conn: Connection, document_id: str, person: str, name: str, kind: str, pages: Sequence[str],
           cut: Sequence[Passage], source: tuple[str, str, str], now: datetime) -> Document | None:
    """Keep a document and its passages, numbered after the person's last; the one kept already under this id if
    there is one; None when the person keeps too many."""
    kept = by_id(conn, document_id)
    if kept is not None:
        return kept
    count = conn.execute(sa.select(sa.func.count()).select_from(documents)
                         .where(documents.c.person == person)).scalar_one()
    if count >= DOCUMENTS_MAX_PER_PERSON:
        return None
    last = conn.execute(sa.select(sa.func.max(documents.c.number)).where(documents.c.person == person)).scalar()
    number = int(last or 0) + 1
    text = PAGE_BREAK.join(pages)
    platform, chat_id, message_id = source
    conn.execute(documents.insert().values(id=document_id, person=person, number=number, name=name, kind=kind,
                                           pages=len(pages), chars=len(text), text=text, platform=platform,
                                           chat_id=chat_id, message_id=message_id, created_at=now))
    if cut:
        conn.execute(document_passages.insert(), [
            {"document_id": document_id, "idx": p.index, "page": p.page, "heading": p.heading, "text": p.text,
             "vector": None, "space": None} for p in cut])
    return Document(document_id, person, number, name, kind, len(pages), len(text), len(cut), now)


def delete(conn: Connection, person: str, number: int) -> Document | None:
    """Remove one of the person's documents, whole; None when they have none with that number."""
    row = conn.execute(sa.select(documents).where(documents.c.person == person,
                                                  documents.c.number == number)).first()
    if row is None:
        return None
    found = _document(row, _counts(conn, [row.id]).get(row.id, 0))
    conn.execute(document_passages.delete().where(document_passages.c.document_id == row.id))
    conn.execute(documents.delete().where(documents.c.id == row.id))
    return found


Fingerprint = tuple[int, datetime | None, int, int]


def fingerprint(conn: Connection, person: str) -> Fingerprint:
    """Changes whenever the person's documents do (one kept, removed, renumbered by a link, its passages embedded)."""
    row = conn.execute(sa.select(sa.func.count(), sa.func.max(documents.c.created_at),
                                 sa.func.coalesce(sa.func.sum(documents.c.number), 0),
                                 sa.func.coalesce(sa.func.sum(documents.c.embedded), 0))
                       .where(documents.c.person == person)).one()
    return int(row[0]), row[1], int(row[2]), int(row[3])


def _passages_of(conn: Connection, person: str) -> tuple[list[Document], list[tuple[str, Passage, bytes | None,
                                                                                     str | None]]]:
    docs = of_person(conn, person)
    if not docs:
        return [], []
    rows = conn.execute(sa.select(document_passages).where(document_passages.c.document_id.in_([d.id for d in docs]))
                        .order_by(document_passages.c.document_id, document_passages.c.idx)).all()
    return docs, [(r.document_id, Passage(r.idx, r.page, r.heading, r.text), r.vector, r.space) for r in rows]


def _unembedded(conn: Connection, document_id: str, space: str, limit: int) -> list[Passage]:
    """Up to ``limit`` of the document's passages with no vector of ``space``, in order."""
    rows = conn.execute(sa.select(document_passages).where(
        document_passages.c.document_id == document_id,
        sa.or_(document_passages.c.space.is_(None), document_passages.c.space != space))
        .order_by(document_passages.c.idx).limit(limit)).all()
    return [Passage(r.idx, r.page, r.heading, r.text) for r in rows]


def _store_vectors(conn: Connection, document_id: str, vectors: Sequence[tuple[int, bytes]], space: str) -> None:
    for idx, vector in vectors:
        conn.execute(document_passages.update().where(document_passages.c.document_id == document_id,
                                                      document_passages.c.idx == idx)
                     .values(vector=vector, space=space))
    embedded = conn.execute(sa.select(sa.func.count()).select_from(document_passages).where(
        document_passages.c.document_id == document_id, document_passages.c.space == space)).scalar_one()
    conn.execute(documents.update().where(documents.c.id == document_id).values(embedded=embedded))


def export_of(conn: Connection, person: str) -> list[dict[str, object]]:
    """The person's documents as their export lists them: each whole, in their own numbering."""
    rows = conn.execute(sa.select(documents).where(documents.c.person == person)
                        .order_by(documents.c.number)).all()
    return [{"number": r.number, "name": r.name, "kind": r.kind, "pages": r.text.split(PAGE_BREAK),
             "shared_at": when(r.created_at),
             "source": {"platform": r.platform, "chat_id": r.chat_id, "message_id": r.message_id}} for r in rows]


def reassign(conn: Connection, old: str, new: str) -> int:
    """Documents follow the person when accounts are linked; renumbered after the new person's own."""
    last = int(conn.execute(sa.select(sa.func.max(documents.c.number)).where(documents.c.person == new)).scalar()
               or 0)
    moved = 0
    for row in conn.execute(sa.select(documents.c.id).where(documents.c.person == old)
                            .order_by(documents.c.number)).all():
        moved += 1
        conn.execute(documents.update().where(documents.c.id == row.id).values(person=new, number=last + moved))
    return moved


DOCUMENTS_DATA = PersonData("documents", tables=(documents, document_passages), topic=DOCUMENTS_TOPIC,
                            move_rows=reassign, export_rows=export_of,
                            forgotten_by="memory.forgetting.scrub.scan")


# --- the index --------------------------------------------------------------------------------
@dataclass(slots=True)
class _Shelf:
    """One person's passages, indexed: ids are "<document id>#<passage index>"."""

    fingerprint: Fingerprint
    documents: dict[str, Document]
    passages: dict[str, tuple[str, Passage]]
    lexical: BM25Index
    vectors: VectorTable | None
    space: str | None


def _passage_id(document_id: str, index: int) -> str:
    return f"{document_id}#{index}"


class DocumentBook:
    """Every person's documents: kept, listed, removed, and their passages searched.

    A document is kept (its text and passages written) at once, and found by its words from then on; its passages
    are embedded after, in the background (``tasks``), a few at a time so replies' own query embeddings are not
    held up behind a long document, and each batch is stored as it is done: a document kept while the embedder was
    down, or one a kill cut short, is embedded by the next search that finds it is not, never on a reply's path.
    """

    def __init__(self, db: Database, vectors: VectorSource, clock: Callable[[], datetime], tasks: BackgroundTasks,
                 *, passage_chars: int = DOCUMENT_CHUNK_CHARS, overlap_chars: int = DOCUMENT_CHUNK_OVERLAP_CHARS,
                 embed_batch: int = DOCUMENT_EMBED_BATCH) -> None:
        self.db = db
        self.vectors = vectors
        self.clock = clock
        self.tasks = tasks
        self.passage_chars = passage_chars
        self.overlap_chars = overlap_chars
        self.embed_batch = embed_batch
        self._shelves: dict[str, _Shelf] = {}
        self._building: dict[str, asyncio.Lock] = {}
        self._embedding: dict[str, asyncio.Task[None]] = {}  # by document id: its passages being embedded

    async def person_of(self, account: str, name: str) -> str:
        # A first-time sender may open with a document, before the conversation ever resolved them.
        return await self.db.run(_person, account, name, self.clock())

    async def keep(self, *, key: str, account: str, sender_name: str, name: str, kind: str, pages: Sequence[str],
                   source: tuple[str, str, str]) -> Document | None:
        """Keep a document (its text already redacted) for the person behind ``account``, cut into passages, and
        start embedding them. The one kept already under ``key`` if there is one; None when they keep too many."""
        person = await self.person_of(account, sender_name)
        kept = await self.db.run(by_id, key)
        if kept is not None:
            self._embed_later(kept.id)  # a kill may have cut its embedding short
            return kept
        started = time.perf_counter()
        cut = passages(pages, markdown=kind == "markdown", size=self.passage_chars, overlap=self.overlap_chars)
        try:
            document = await self.db.run(insert, key, person, name, kind, pages, cut, source, self.clock())
        finally:
            self.db.mark(DOCUMENTS_TOPIC)
        if document is not None:
            log.info("document kept person=%s number=%d pages=%d chars=%d passages=%d ms=%.0f", person,
                     document.number, document.pages, document.chars, len(cut), (time.perf_counter() - started) * 1000)
            self._embed_later(document.id)
        return document

    def _embed_later(self, document_id: str) -> None:
        if not self.vectors.ready or document_id in self._embedding:
            return
        job = self.tasks.spawn(self._embed_document(document_id), name="document-embed")
        self._embedding[document_id] = job
        job.add_done_callback(lambda _done: self._embedding.pop(document_id, None))

    async def _embed_document(self, document_id: str) -> None:
        """Embed the document's passages that have no vector of the embedder's space, a batch at a time."""
        started, done = time.perf_counter(), 0
        while self.vectors.ready:
            space = self.vectors.space
            todo = await self.db.run(_unembedded, document_id, space, self.embed_batch)
            if not todo:
                break
            got = await self.vectors.vectors([p.searchable() for p in todo])
            if not got.from_embedder or got.space != space:
                log.warning("document passages not embedded document=%s: the embedder failed", document_id)
                return
            values = [(p.index, np.asarray(v, dtype=np.float32).tobytes()) for p, v in zip(todo, got.values,
                                                                                          strict=True)]
            try:
                await self.db.run(_store_vectors, document_id, values, space)
            finally:
                self.db.mark(DOCUMENTS_TOPIC)
            done += len(todo)
        if done:
            log.info("document embedded document=%s passages=%d ms=%.0f", document_id, done,
                     (time.perf_counter() - started) * 1000)

    async def settle(self) -> None:
        """Wait for the embeddings under way (tests, benchmarks)."""
        while self._embedding:
            await asyncio.gather(*self._embedding.values(), return_exceptions=True)

    async def list(self, person: str) -> list[Document]:
        return await self.db.run(of_person, person)

    async def remove(self, person: str, number: int) -> Document | None:
        try:
            removed = await self.db.run(delete, person, number)
        finally:
            self.db.mark(DOCUMENTS_TOPIC)
        self._shelves.pop(person, None)
        if removed is not None and (job := self._embedding.get(removed.id)) is not None:
            job.cancel()
        return removed

    async def search(self, person: str, query: str, query_vector: Sequence[float] | None, query_space: str | None,
                     k: int) -> list[PassageHit]:
        """The person's passages that match ``query`` on either path: the ``k`` best by BM25 and the ``k`` nearest
        to ``query_vector`` (of ``query_space``), each with its cosine (when it was among the nearest) and its BM25
        normalised to the best lexical hit. Unranked: :mod:`memory.recall.ranking` orders them."""

        async def given() -> tuple[Sequence[float], str] | None:
            return (query_vector, query_space or "") if query_vector is not None else None

        return await self.passages_for(person, query, k, given)

    async def passages_for(self, person: str, query: str, k: int,
                           query_vector: Callable[[], Awaitable[tuple[Sequence[float], str] | None]]
                           ) -> list[PassageHit]:
        """:meth:`search`, asking ``query_vector`` for the query's vector and its space only when the person keeps
        a document: a reply to someone who keeps none costs one small read, no embedding."""
        shelf = await self._shelf(person)
        if shelf is None or k <= 0:
            return []
        bm25 = dict(normalize_scores(shelf.lexical.search(query, k)))
        cosines: dict[str, float] = {}
        vector = await query_vector() if shelf.vectors is not None else None
        if vector is not None and shelf.vectors is not None and vector[1] == shelf.space:
            cosines = dict(shelf.vectors.nearest(vector[0], k))
        hits = []
        for passage_id in dict.fromkeys([*cosines, *bm25]):
            document_id, passage = shelf.passages[passage_id]
            hits.append(PassageHit(shelf.documents[document_id], passage, cosines.get(passage_id),
                                   bm25.get(passage_id, 0.0)))
        return hits

    async def _shelf(self, person: str) -> _Shelf | None:
        now = await self.db.run_short(fingerprint, person)
        if now[0] == 0:
            self._shelves.pop(person, None)
            return None
        shelf = self._shelves.get(person)
        if shelf is not None and shelf.fingerprint == now:
            return shelf
        lock = self._building.setdefault(person, asyncio.Lock())
        async with lock:
            shelf = self._shelves.get(person)
            if shelf is not None and shelf.fingerprint == now:
                return shelf
            shelf = await self._build(person)
            self._shelves[person] = shelf
            return shelf

    async def _build(self, person: str) -> _Shelf:
        started = time.perf_counter()
        mark = await self.db.run_short(fingerprint, person)
        docs, rows = await self.db.run(_passages_of, person)
        space = self.vectors.space if self.vectors.ready and self.vectors.space != HASH_SPACE else None
        lexical = BM25Index()
        lexical.add_many((_passage_id(d, p.index), p.searchable()) for d, p, _v, _s in rows)
        ids: list[str] = []
        values: list[np.ndarray] = []
        unembedded: set[str] = set()
        for document_id, p, vector, stored in rows:
            if space is None:
                continue
            if vector is None or stored != space:
                unembedded.add(document_id)  # kept while the embedder was down, under another, or cut by a kill
                continue
            ids.append(_passage_id(document_id, p.index))
            values.append(np.frombuffer(vector, dtype=np.float32))
        for document_id in unembedded:
            self._embed_later(document_id)
        table = None
        if ids:
            dim = values[0].size
            keep = [i for i, v in enumerate(values) if v.size == dim]
            table = VectorTable.build(dim, [ids[i] for i in keep], np.stack([values[i] for i in keep]),
                                      [Scope.DM] * len(keep))
        log.debug("documents indexed person=%s documents=%d passages=%d vectors=%d ms=%.0f", person, len(docs),
                  len(rows), len(ids), (time.perf_counter() - started) * 1000)
        return _Shelf(mark, {d.id: d for d in docs},
                      {_passage_id(d, p.index): (d, p) for d, p, _v, _s in rows}, lexical, table, space)


def _person(conn: Connection, account: str, name: str, now: datetime) -> str:
    return directory.person_of(conn, account) or directory.resolve(conn, account, name, now)
