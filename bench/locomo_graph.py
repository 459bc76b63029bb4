"""Each LoCoMo conversation's graph, built by the code that builds a person's graph in kith
(:meth:`memory.graph.view.PersonGraph.grow`), from a stand-in for what capture's model would propose.

kith's graph grows from relations a model proposes with each captured memory. The benchmark runs no model: LoCoMo's
own per-session observations stand in for the captured facts (each says which turns it rests on, its evidence ids),
and their relations are read from their words by fixed rules, no model and nothing learned from the questions:

* the subject is the speaker the observation is about;
* the objects are the names in it (capitalised words, leading function words dropped) and its other content words
  of four letters or more (not those of a name already taken), the speaker's own name left out;
* the relation is a generic "talked about";
* one proposal per object and evidence turn, whose memory is that turn's (``memory_id``), so the relation's
  receipt is the memory the words became, as ``attach`` makes it in kith.

Far noisier than a model's relations (every content word is a "thing"), and far more of them: a being named in
too many becomes a hub that the recall engine does not fetch through (:meth:`PersonGraph.is_hub`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.core.graph_records import EntityKind, RelationProposal
from memory.core.records import Scope, Source
from memory.core.text import content_words, is_stop_word
from memory.graph.names import name_key
from memory.graph.view import PersonGraph, Proposed

STAND_IN = ("graph: LoCoMo's per-session observations (with their evidence turn ids) stand in for the relations "
            "capture's model would propose; entities are their names and content words, the relation generic")
RELATION = "talked about"
MIN_WORD_CHARS = 4
_CAPITALISED = re.compile(r"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


@dataclass(frozen=True, slots=True)
class Observation:
    speaker: str
    text: str
    evidence: tuple[str, ...]  # dia ids
    said_at: datetime


def things_in(text: str, speaker: str) -> list[str]:
    """The names and content words ``text`` says about ``speaker``, each once (as names compare)."""
    own = name_key(speaker)
    found: dict[str, str] = {}
    for m in _CAPITALISED.finditer(text):
        words = m.group(0).split()
        while words and is_stop_word(words[0].lower()):
            words = words[1:]
        phrase = " ".join(words)
        key = name_key(phrase)
        if key and key != own and not all(is_stop_word(w) for w in key.split()):
            found.setdefault(key, phrase)
    in_names = {w for key in found for w in key.split()}
    for word in content_words(text):
        key = name_key(word)
        if len(key) >= MIN_WORD_CHARS and key != own and key not in in_names and not word.isdigit():
            found.setdefault(key, word)
    return list(found.values())


def proposals(observations: Sequence[Observation], memory_of: Callable[[str], str | None], chat: str
              ) -> list[Proposed]:
    """The stand-in proposals: ``memory_of`` gives a dia id's memory id (None: no such turn)."""
    out: list[Proposed] = []
    for o in observations:
        turns = [(dia_id, m) for dia_id in o.evidence if (m := memory_of(dia_id)) is not None]
        for thing in things_in(o.text, o.speaker):
            for dia_id, memory_id in turns:
                out.append(Proposed(RelationProposal(o.speaker, EntityKind.PERSON, RELATION, thing, None),
                                    evidence=(o.text,), evidence_sentences=(o.text,),
                                    sources=(Source("locomo", chat, dia_id, o.said_at),), scope=Scope.DM,
                                    said_at=o.said_at, memory_id=memory_id))
    return out


def build(person: str, observations: Sequence[Observation], memory_of: Callable[[str], str | None], chat: str,
          now: datetime) -> PersonGraph:
    graph = PersonGraph(person)
    graph.grow(proposals(observations, memory_of, chat), now)
    return graph


class Graphs:
    """The benchmark's graphs by person, read as the engine reads GraphBook."""

    def __init__(self) -> None:
        self.by_person: dict[str, PersonGraph] = {}

    async def of(self, person: str) -> PersonGraph:
        return self.by_person.get(person) or PersonGraph(person)
