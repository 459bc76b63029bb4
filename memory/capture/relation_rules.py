"""The receipts rule for the graph: which of a memory's proposed relations its quotes support.

A relation rides on one proposed memory and is checked only after that memory passed every rule of
:mod:`memory.capture.validation` (so it was said as true, by this person, in earnest, and is no order or
authority claim). Then, per relation (a failing one is dropped and counted; the memory and the others stand):

* ``subject``, ``relation`` and ``object`` are non-empty strings of at most ``MAX_NAME_CHARS``;
  ``subject_kind`` and ``object_kind``, when given, are :class:`~memory.core.graph_records.EntityKind` values;
* an end is the person themselves when it is ``PERSON`` (the transcript's label), a first-person pronoun, or one
  of their own display names; any other name must be in the memory's quotes, every word of it (the same word
  matching as the support rules: "Warszawa" is in "w Warszawie");
* every content word of ``relation`` is in the quotes, as every content word of a memory is: "sister of" needs
  "sister" said, "lives in" a form of "live";
* the two ends differ, and nothing in a name is a secret (a name the redactor would change is refused whole).

``aliases`` (optional, on the memory) are pairs of names the quotes give one being ("my sister", "Ola"); each name
is checked as an end is. At most ``MAX_RELATIONS_PER_MEMORY`` relations and as many alias pairs are read.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ground.redaction import redact
from ground.tunables import MAX_RELATIONS_PER_MEMORY
from memory.capture.support_rules import ungrounded_words
from memory.core.graph_records import SELF_NAME, EntityKind, RelationProposal
from memory.core.text import fold, is_stop_word, normalize, tokens, words_match

MAX_NAME_CHARS = 80
_FIRST_PERSON = frozenset({"person", "i", "me", "myself"})
_KINDS = {kind.value: kind for kind in EntityKind}


class RelationRefusal(enum.StrEnum):
    OVER_LIMIT = "over_limit"
    NOT_AN_OBJECT = "not_an_object"
    INVALID_NAME = "invalid_name"
    INVALID_KIND = "invalid_kind"
    INVALID_RELATION = "invalid_relation"
    NAME_NOT_SAID = "name_not_said"
    RELATION_NOT_SAID = "relation_not_said"
    SAME_ENDS = "same_ends"
    SECRET = "secret"


@dataclass(slots=True)
class RelationsChecked:
    relations: list[RelationProposal] = field(default_factory=list)
    aliases: list[tuple[str, str]] = field(default_factory=list)
    refused: Counter[RelationRefusal] = field(default_factory=Counter)


def _text(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = normalize(value)
    return text if text and len(text) <= MAX_NAME_CHARS else None


def _is_self(name: str, person_names: Sequence[str]) -> bool:
    return fold(name) in _FIRST_PERSON or name == SELF_NAME or any(fold(name) == fold(n) for n in person_names)


def _name_said(name: str, quote_words: Sequence[str]) -> bool:
    wanted = [t for t in tokens(name) if not is_stop_word(t)] or tokens(name)
    return bool(wanted) and all(any(words_match(w, q) for q in quote_words) for w in wanted)


def _end(value: object, quote_words: Sequence[str], person_names: Sequence[str]) -> str | RelationRefusal:
    name = _text(value)
    if name is None:
        return RelationRefusal.INVALID_NAME
    if _is_self(name, person_names):
        return SELF_NAME
    if redact(name) != name:
        return RelationRefusal.SECRET
    return name if _name_said(name, quote_words) else RelationRefusal.NAME_NOT_SAID


def _kind(value: object) -> EntityKind | RelationRefusal | None:
    if value is None:
        return None
    return _KINDS.get(value, RelationRefusal.INVALID_KIND) if isinstance(value, str) else RelationRefusal.INVALID_KIND


def _one(raw: object, quotes: Sequence[str], quote_words: Sequence[str],
         person_names: Sequence[str]) -> RelationProposal | RelationRefusal:
    if not isinstance(raw, dict):
        return RelationRefusal.NOT_AN_OBJECT
    subject = _end(raw.get("subject"), quote_words, person_names)
    obj = _end(raw.get("object"), quote_words, person_names)
    for end in (subject, obj):
        if isinstance(end, RelationRefusal):
            return end
    assert isinstance(subject, str) and isinstance(obj, str)
    subject_kind, object_kind = _kind(raw.get("subject_kind")), _kind(raw.get("object_kind"))
    for kind in (subject_kind, object_kind):
        if isinstance(kind, RelationRefusal):
            return kind
    relation = _text(raw.get("relation"))
    if relation is None or not tokens(relation):
        return RelationRefusal.INVALID_RELATION
    if ungrounded_words(relation, quotes):
        return RelationRefusal.RELATION_NOT_SAID
    if fold(subject) == fold(obj):
        return RelationRefusal.SAME_ENDS
    return RelationProposal(subject, subject_kind if subject != SELF_NAME else None,  # type: ignore[arg-type]
                            relation, obj, object_kind if obj != SELF_NAME else None)  # type: ignore[arg-type]


def check_relations(item: dict[str, object], quotes: Sequence[str], person_names: Sequence[str]) -> RelationsChecked:
    """The relations and alias pairs of one proposed memory (``item``) that its ``quotes`` support."""
    checked = RelationsChecked()
    quote_words = [w for q in quotes for w in tokens(q)]
    raw = item.get("relations")
    if isinstance(raw, list):
        for index, proposal in enumerate(raw):
            if index >= MAX_RELATIONS_PER_MEMORY:
                checked.refused[RelationRefusal.OVER_LIMIT] += 1
                continue
            outcome = _one(proposal, quotes, quote_words, person_names)
            if isinstance(outcome, RelationRefusal):
                checked.refused[outcome] += 1
            elif outcome not in checked.relations:
                checked.relations.append(outcome)
    elif raw is not None:
        checked.refused[RelationRefusal.NOT_AN_OBJECT] += 1
    pairs = item.get("aliases")
    if isinstance(pairs, list):
        for index, pair in enumerate(pairs):
            if index >= MAX_RELATIONS_PER_MEMORY:
                break
            if not (isinstance(pair, list) and len(pair) == 2):
                checked.refused[RelationRefusal.NOT_AN_OBJECT] += 1
                continue
            ends = [_end(name, quote_words, person_names) for name in pair]
            if any(isinstance(e, RelationRefusal) or e == SELF_NAME for e in ends):
                checked.refused[RelationRefusal.NAME_NOT_SAID] += 1
                continue
            checked.aliases.append((str(ends[0]), str(ends[1])))
    return checked
