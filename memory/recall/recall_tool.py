"""The persona's read-only ``recall`` tool: deliberate search of what kith remembers.

Automatic context shows a few clipped candidates; this tool gives more of each: the person's own words
(:func:`memory.core.words.words_of`: their newest sentences, whole) with who said them and where and when
(platform, private or group chat, date), as JSON. That record is what "how do you know that?" is answered
from, and only that. The extractor's label for a memory is not in it: a wrong label cannot reach a reply,
and a memory with no words kept is left out. It obeys the same isolation as automatic recall: the speaker's
own live records, and in a group chat nothing said in private. In a private chat it also returns the passages of
the person's documents that match (:class:`DocumentFinder`, implemented by the documents room above this one). It
never writes.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from ground.config import RecallSettings
from ground.tunables import (
    RECALL_TOOL_EMBED_BUDGET_MS,
    RECALL_TOOL_EVIDENCE,
    RECALL_TOOL_MAX_CHARS,
    RECALL_TOOL_QUOTE_CHARS,
)
from ground.turns import Speaker
from ground.types import ChatKind, InboundMessage, printable_name
from memory.core.records import MemoryRecord, Scope
from memory.core.words import clip_item, words_of
from memory.graph.book import GraphBook
from memory.graph.who import Being, who
from memory.recall.engine import RecallEngine
from memory.recall.ranking import Ranked
from persona.instructions import (
    RECALL_EMPTY_QUERY,
    RECALL_LIMIT_DESCRIPTION,
    RECALL_QUERY_DESCRIPTION,
    RECALL_TOOL_DESCRIPTION,
    RECALL_TOOL_HINT,
    RECALL_WHO_DESCRIPTION,
)
from persona.labels import (
    RECALL_DISPUTED_NOTE,
    RECALL_DOCUMENTS_ABOUT,
    RECALL_RESULTS_ABOUT,
    RECALL_WHO_ABOUT,
    RECALL_WHO_UNKNOWN,
    UNNAMED_SPEAKER,
    chat_label,
    search_label,
    stored_label,
)

log = logging.getLogger("kith.memory.recall_tool")


def result_json(ranked: Ranked, disputed_by: list[str], who: str = "") -> dict[str, Any] | None:
    """One result: the memory's words (newest sentences, each clipped) with who said them, where and when;
    ``None`` for a memory with no words kept."""
    record: MemoryRecord = ranked.record
    words = words_of(record)
    if not words.sentences:
        return None
    clipped = [clip_item(s, RECALL_TOOL_QUOTE_CHARS) for s in words.sentences[-RECALL_TOOL_EVIDENCE:]]
    return {
        "id": record.id,
        "words": [text for text, _cut in clipped],
        "whole_sentences": words.whole,
        "truncated": any(cut for _text, cut in clipped) or len(words.sentences) > RECALL_TOOL_EVIDENCE,
        "said_by": printable_name(who) or UNNAMED_SPEAKER,
        "said": [{"platform": s.platform, "chat": chat_label(private=record.scope is Scope.DM),
                  "when": s.timestamp.isoformat()} for s in record.sources[-RECALL_TOOL_EVIDENCE:]],
        "stored": stored_label(note=ranked.match.note),
        "origin": record.origin.value,
        "confidence": record.tier.value,
        "pinned": record.pinned,
        "disputed_by": disputed_by,
        "score": round(ranked.score, 3),
    }


def being_json(found: Being) -> dict[str, Any]:
    """Who or what a name is to the person: each relation as it reads from that being, with the person's words (the
    relation's every word is in them: :mod:`memory.capture.relation_rules`), where and when, and whether it holds."""
    links = []
    for link in found.links[:RECALL_TOOL_MAX_LINKS]:
        clipped = [text for text, _cut in (clip_item(s, RECALL_TOOL_QUOTE_CHARS)
                                           for s in link.words[-RECALL_TOOL_EVIDENCE:])]
        links.append({"relation": link.reads(found.name), "words": clipped,
                      "said": [{"platform": s.platform, "chat": chat_label(private=link.scope is Scope.DM),
                                "when": s.timestamp.isoformat()} for s in link.sources[-RECALL_TOOL_EVIDENCE:]],
                      "holds": link.valid_to is None,
                      **({"held_until": link.valid_to.isoformat()} if link.valid_to is not None else {})})
    return {"name": found.name, "also_called": list(found.other_names),
            "kind": found.kind.value if found.kind else None, "relations": links}


RECALL_TOOL_MAX_LINKS = 12  # relations of one being the tool returns


class DocumentFinder(Protocol):
    """The passages of a person's documents that match a query, each as the tool's JSON, best first."""

    async def find(self, person: str, query: str, budget_s: float) -> list[dict[str, Any]]: ...


class RecallTool:
    """Implements conversation.core.Tool."""

    name = "recall"
    hint = RECALL_TOOL_HINT

    def __init__(self, engine: RecallEngine, settings: RecallSettings, graph: GraphBook | None = None,
                 documents: DocumentFinder | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.graph = graph  # answers "who is X?" (memory.graph.who)
        self.documents = documents  # the person's documents, searched in a private chat

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": RECALL_TOOL_DESCRIPTION,
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string",
                                  "description": RECALL_QUERY_DESCRIPTION},
                        "who": {"type": "string", "description": RECALL_WHO_DESCRIPTION},
                        "limit": {"type": "integer", "minimum": 1, "maximum": self.settings.tool_max_items,
                                  "description": RECALL_LIMIT_DESCRIPTION},
                    },
                },
            },
        }

    async def call(self, arguments: dict[str, Any], speaker: Speaker, message: InboundMessage) -> str:
        query, name = arguments.get("query"), arguments.get("who")
        name = name.strip() if isinstance(name, str) else ""
        if (not isinstance(query, str) or not query.strip()) and name:
            query = name  # their memories that name it come too
        if not isinstance(query, str) or not query.strip():
            return json.dumps({"error": RECALL_EMPTY_QUERY})
        limit = arguments.get("limit", self.settings.tool_max_items)
        if isinstance(limit, bool) or not isinstance(limit, int):
            limit = self.settings.tool_max_items
        limit = max(1, min(limit, self.settings.tool_max_items))
        shared_only = message.chat_kind is ChatKind.GROUP
        result = await self.engine.search(speaker.person, query, limit=limit, shared_only=shared_only,
                                          budget_s=RECALL_TOOL_EMBED_BUDGET_MS / 1000)
        memories = [r.record for r in result.items if not r.match.note]
        partners = await self.engine.conflict_partners(speaker.person, memories, shared_only=shared_only)
        found = (result_json(r, [p.id for p in partners.get(r.record.id, [])], speaker.name) for r in result.items)
        results = [r for r in found if r is not None]
        answer: dict[str, Any] = {
            "about": RECALL_RESULTS_ABOUT,
            "query": query,
            "search": search_label(lexical_only=result.lexical_only),
            "results": results,
        }
        if result.lexical_only and result.reason:
            answer["note"] = result.reason
        if any(r["disputed_by"] for r in results):
            answer["disputed"] = RECALL_DISPUTED_NOTE
        if name and self.graph is not None:
            # In a group chat only what was said where others could read it, as for every result here.
            named = who(await self.graph.of(speaker.person), name, shared_only=shared_only)
            answer["who"] = ({"about": RECALL_WHO_ABOUT, **being_json(named)} if named is not None
                             else {"name": name, "about": RECALL_WHO_UNKNOWN})
        if self.documents is not None and message.chat_kind is ChatKind.DM:
            passages = await self._passages(speaker.person, query)
            if passages:
                answer["documents"] = {"about": RECALL_DOCUMENTS_ABOUT, "passages": passages}
        text = json.dumps(answer, ensure_ascii=False)
        while len(text) > RECALL_TOOL_MAX_CHARS and answer.get("documents", {}).get("passages"):
            answer["documents"]["passages"].pop()
            text = json.dumps(answer, ensure_ascii=False)
        while len(text) > RECALL_TOOL_MAX_CHARS and answer["results"]:
            answer["results"].pop()
            text = json.dumps(answer, ensure_ascii=False)
        while len(text) > RECALL_TOOL_MAX_CHARS and answer.get("who", {}).get("relations"):
            answer["who"]["relations"].pop()
            text = json.dumps(answer, ensure_ascii=False)
        log.info("recall tool person=%s results=%d passages=%d lexical_only=%s ms=%.1f", speaker.person,
                 len(answer["results"]), len(answer.get("documents", {}).get("passages", ())), result.lexical_only,
                 result.elapsed_ms)
        return text

    async def _passages(self, person: str, query: str) -> list[dict[str, Any]]:
        assert self.documents is not None
        try:
            return await self.documents.find(person, query, RECALL_TOOL_EMBED_BUDGET_MS / 1000)
        except Exception as exc:  # the memories still answer when the documents cannot
            log.warning("recall tool documents unavailable person=%s error=%s", person, type(exc).__name__)
            return []
