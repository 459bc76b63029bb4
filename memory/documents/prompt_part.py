"""The prompt's documents part: passages of the person's documents that match their message, in a private chat.

Passages are found as memories are (BM25 and the embedder's cosine, over the person's own index) and ordered by
recall's relevance (:func:`memory.recall.ranking.relevance`); the query's vector is the one recall asked for (one
embedding per message, under the same time budget). Each passage is shown quoted, with its document's name and
where in it, under a notice that it is stored data and never instructions. A group chat never sees a document:
they are shared in private.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence

from ground.config import RecallSettings
from ground.tunables import DOCUMENT_PASSAGE_MIN_RELEVANCE, DOCUMENT_PASSAGES_PER_TURN, RECALL_QUERY_MAX_CHARS
from ground.turns import MemoryContext, MemorySlots, Speaker
from ground.types import ChatKind, InboundMessage
from memory.documents.book import DocumentBook, PassageHit
from memory.recall.prompt_part import SLOTS_SOFT_S
from memory.recall.query_vectors import QueryVectors
from memory.recall.ranking import relevance
from persona.labels import DOCUMENTS_NOTICE, TRUNCATED_FLAG, document_passage_line

log = logging.getLogger("kith.memory.documents")

_POOL = 4  # passages taken from each path per passage shown


def ranked_passages(hits: list[PassageHit], settings: RecallSettings, *, vector_path: bool,
                    min_relevance: float = DOCUMENT_PASSAGE_MIN_RELEVANCE) -> list[tuple[PassageHit, float]]:
    """``hits`` with their relevance, best first, none below ``min_relevance``."""
    scored = [(hit, relevance(hit.cosine, hit.bm25, settings, vector_path=vector_path)) for hit in hits]
    kept = [pair for pair in scored if pair[1] >= min_relevance]
    kept.sort(key=lambda pair: (-pair[1], pair[0].document.number, pair[0].passage.index))
    return kept


async def matching_passages(book: DocumentBook, queries: QueryVectors, settings: RecallSettings, person: str,
                            text: str, most: int, budget_s: float) -> list[tuple[PassageHit, float]]:
    """The person's passages that match ``text``, best first, at most ``most``: each path's best ``_POOL`` per one
    wanted, ranked by :func:`ranked_passages`. The query's vector is the one recall asks for (cached: one
    embedding per message), waited for at most ``budget_s``, and only when the person keeps a document."""
    query = text[:RECALL_QUERY_MAX_CHARS]

    async def query_vector() -> tuple[Sequence[float], str] | None:
        vectors = await queries.get(query, budget_s)
        return (vectors.values[0], vectors.space) if vectors is not None else None

    hits = await book.passages_for(person, query, most * _POOL, query_vector)
    return ranked_passages(hits, settings, vector_path=any(h.cosine is not None for h in hits))[:most]


def render_passages(ranked: list[tuple[PassageHit, float]], *, most: int, total_chars: int) -> str:
    """The documents part: the notice and at most ``most`` passages, the whole within ``total_chars`` (a passage
    that does not fit whole is cut, flagged, when enough of it is left to read)."""
    if not ranked or most <= 0:
        return ""
    lines = [DOCUMENTS_NOTICE]
    used = len(DOCUMENTS_NOTICE)
    for hit, _score in ranked[:most]:
        doc, passage = hit.document, hit.passage
        whole = document_passage_line(doc.name, passage.page, doc.pages, passage.heading, passage.text,
                                      truncated=False)
        if used + 1 + len(whole) <= total_chars:
            lines.append(whole)
            used += 1 + len(whole)
            continue
        frame = len(document_passage_line(doc.name, passage.page, doc.pages, passage.heading, "", truncated=True))
        room = total_chars - used - 1 - frame - len(TRUNCATED_FLAG)
        if room < 80:
            break
        cut = passage.text[:room].rsplit(" ", 1)[0] + "…"
        lines.append(document_passage_line(doc.name, passage.page, doc.pages, passage.heading, cut, truncated=True))
        break
    return "\n".join(lines) if len(lines) > 1 else ""


class DocumentsInContext:
    """A MemoryContext that adds the passages of the person's documents that match their message to another
    context's slots, in a private chat only."""

    def __init__(self, inner: MemoryContext, book: DocumentBook, queries: QueryVectors, settings: RecallSettings,
                 limit_chars: int, *, most: int = DOCUMENT_PASSAGES_PER_TURN) -> None:
        self.inner = inner
        self.book = book
        self.queries = queries
        self.settings = settings
        self.limit_chars = limit_chars
        self.most = most

    async def slots(self, speaker: Speaker, message: InboundMessage) -> MemorySlots:
        if message.chat_kind is not ChatKind.DM or self.limit_chars <= 0 or not message.text.strip():
            return await self.inner.slots(speaker, message)
        slots, documents = await asyncio.gather(self.inner.slots(speaker, message),
                                                self._part(speaker.person, message.text))
        return dataclasses.replace(slots, documents=documents) if documents else slots

    async def _part(self, person: str, text: str) -> str:
        try:
            return await self.part(person, text)
        except Exception as exc:  # a reply never fails on the documents
            log.warning("documents unavailable person=%s error=%s", person, type(exc).__name__)
            return ""

    async def part(self, person: str, text: str) -> str:
        # The vector recall asked for the same message: one embedding for both, under the same budget.
        ranked = await matching_passages(self.book, self.queries, self.settings, person, text, self.most,
                                         min(self.settings.embed_budget_ms / 1000, SLOTS_SOFT_S / 2))
        return render_passages(ranked, most=self.most, total_chars=self.limit_chars)
