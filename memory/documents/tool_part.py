"""What the ``recall`` tool finds in the person's documents: the passages that match its query, as data.

The tool is recall's (:mod:`memory.recall.recall_tool`); documents sit above recall, so the tool is handed this
finder (:class:`memory.recall.recall_tool.DocumentFinder`) rather than importing it. Passages are found and ordered
as the prompt's documents part finds them (:func:`memory.documents.prompt_part.matching_passages`), under the
tool's own embedding budget. The tool asks in a private chat only: documents are shared in private.
"""

from __future__ import annotations

from typing import Any

from ground.config import RecallSettings
from ground.tunables import RECALL_TOOL_DOCUMENT_PASSAGES, RECALL_TOOL_QUOTE_CHARS
from memory.core.words import clip_item
from memory.documents.book import DocumentBook, PassageHit
from memory.documents.prompt_part import matching_passages
from memory.recall.query_vectors import QueryVectors


def passage_json(hit: PassageHit) -> dict[str, Any]:
    """One passage: which document (its name and its number in ``/docs``), where in it, and its words."""
    doc, passage = hit.document, hit.passage
    words, cut = clip_item(passage.text, RECALL_TOOL_QUOTE_CHARS)
    found: dict[str, Any] = {"document": doc.name, "number": doc.number}
    if doc.pages > 1:
        found["page"], found["pages"] = passage.page, doc.pages
    if passage.heading:
        found["under"] = passage.heading
    found |= {"words": words, "truncated": cut, "shared": doc.created_at.date().isoformat()}
    return found


class DocumentPassages:
    """Implements memory.recall.recall_tool.DocumentFinder over the person's documents."""

    def __init__(self, book: DocumentBook, queries: QueryVectors, settings: RecallSettings,
                 most: int = RECALL_TOOL_DOCUMENT_PASSAGES) -> None:
        self.book = book
        self.queries = queries
        self.settings = settings
        self.most = most

    async def find(self, person: str, query: str, budget_s: float) -> list[dict[str, Any]]:
        ranked = await matching_passages(self.book, self.queries, self.settings, person, query, self.most, budget_s)
        return [passage_json(hit) for hit, _relevance in ranked]
