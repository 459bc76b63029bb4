"""Is a new fact a repeat of a stored one, a disagreement with it, or new?

The rule: near-identical facts merge (one fact, not two); related facts that disagree are
both kept and flagged as conflicting so kith asks which is current; nothing is deleted or
rewritten here. Two layers decide:

* the **lexical** layer, always available and deterministic, works on content words
  (:func:`memory.core.text.content_words`; :func:`memory.core.text.words_match` decides when two
  words are the same). Its score is the best of:

  - Jaccard overlap of the two word sets;
  - a containment term, ``sqrt(|shorter| / |longer|)``, that fires only when every content
    word of the shorter fact appears in the longer one (a repeated preference with detail
    added) - harsher than plain containment, which would give 1.0;
  - ``SINGLE_WORD_LINK_SCORE`` when both facts are short (at most ``SHORT_FACT_MAX_WORDS``
    content words) and share a distinctive word, so long sentences cannot link on one word;

* the **embedding** layer: a cosine the caller got from the embedder. It counts only when
  it really came from the embedder (``cosine_from_embedder``); a cosine from a cold or
  partial index is ignored outright, so it can neither merge nor manufacture a conflict.

Decision: MERGE when either layer scores above ``MERGE_THRESHOLD``. Otherwise, for facts of
the same kind only, CONFLICT when a trusted cosine is in ``[CONFLICT_THRESHOLD,
MERGE_THRESHOLD]``, or when the lexical score is in that band *and* both facts have at least
``CONFLICT_MIN_WORDS`` content words, at least ``CONFLICT_MIN_AGREEMENTS`` words agree and the
Jaccard is at least ``CONFLICT_MIN_JACCARD``. Otherwise NEW. The band includes the merge line
itself: a score exactly on it is not above it, so it is judged as a possible conflict, not left
undecided.

One more guard: when exactly one of the two facts is negated ("I like tea" /
"I don't like tea"), they can never merge, since that would silently overwrite one with its
opposite; their score is capped at the merge line, so they are judged as a possible conflict.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ground.tunables import (
    CONFLICT_MIN_AGREEMENTS,
    CONFLICT_MIN_JACCARD,
    CONFLICT_MIN_WORDS,
    CONFLICT_THRESHOLD,
    DISTINCTIVE_MIN_CHARS,
    MERGE_THRESHOLD,
    SHORT_FACT_MAX_WORDS,
    SINGLE_WORD_LINK_SCORE,
)
from memory.core.text import content_words, is_cjk_token, is_negation, words_match

# A shared word this short ("car", "tea" pass; "go", "tv" do not) is too common to link two facts.


class Action(enum.StrEnum):
    MERGE = "merge"
    CONFLICT = "conflict"
    NEW = "new"


class Via(enum.StrEnum):
    LEXICAL = "lexical"
    EMBEDDING = "embedding"


@dataclass(frozen=True, slots=True)
class LexicalScore:
    score: float  # max(jaccard, containment, link)
    jaccard: float
    containment: float  # 0.0 unless every word of the shorter fact is in the longer
    link: float  # SINGLE_WORD_LINK_SCORE when the short-fact link fired, else 0.0
    shared: int  # words of a that matched a distinct word of b
    words_a: int
    words_b: int
    negation_mismatch: bool  # exactly one side is negated


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    score: float  # the score that decided (0.0 for NEW with nothing related)
    via: Via | None  # which layer decided; None for NEW
    lexical: LexicalScore


class Comparable(Protocol):
    """What :func:`matches` needs of a stored memory (a :class:`~memory.core.records.MemoryRecord` fits)."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def kind(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Match:
    id: str
    decision: Decision


def _shared_words(a: set[str], b: set[str]) -> list[str]:
    """Words of ``a`` paired one-to-one with words of ``b``: exact pairs first, then fuzzy."""
    unmatched = set(b)
    shared: list[str] = []
    fuzzy: list[str] = []
    for word in sorted(a):
        if word in unmatched:
            unmatched.discard(word)
            shared.append(word)
        else:
            fuzzy.append(word)
    for word in fuzzy:
        for other in sorted(unmatched):
            if words_match(word, other):
                unmatched.discard(other)
                shared.append(word)
                break
    return shared


def _is_distinctive(word: str) -> bool:
    return not is_negation(word) and (is_cjk_token(word) or len(word) >= DISTINCTIVE_MIN_CHARS)


def lexical_similarity(a: str, b: str) -> LexicalScore:
    """The lexical score of two fact texts (symmetric), over their content words, with whether one is negated."""
    words_a, words_b = set(content_words(a)), set(content_words(b))
    negation_mismatch = any(map(is_negation, words_a)) != any(map(is_negation, words_b))
    if not words_a or not words_b:
        return LexicalScore(0.0, 0.0, 0.0, 0.0, 0, len(words_a), len(words_b), negation_mismatch)
    shared_words = _shared_words(words_a, words_b)
    shared = len(shared_words)
    jaccard = shared / (len(words_a) + len(words_b) - shared)
    shorter, longer = sorted((len(words_a), len(words_b)))
    containment = math.sqrt(shorter / longer) if shared == shorter else 0.0
    both_short = longer <= SHORT_FACT_MAX_WORDS
    link = SINGLE_WORD_LINK_SCORE if both_short and any(map(_is_distinctive, shared_words)) else 0.0
    return LexicalScore(
        score=max(jaccard, containment, link),
        jaccard=jaccard,
        containment=containment,
        link=link,
        shared=shared,
        words_a=len(words_a),
        words_b=len(words_b),
        negation_mismatch=negation_mismatch,
    )


def _lexical_conflict_gates(lex: LexicalScore) -> bool:
    return (
        min(lex.words_a, lex.words_b) >= CONFLICT_MIN_WORDS
        and lex.shared >= CONFLICT_MIN_AGREEMENTS
        and lex.jaccard >= CONFLICT_MIN_JACCARD
    )


def decide(
    new: str,
    existing: str,
    *,
    cosine: float | None = None,
    cosine_from_embedder: bool = False,
    same_kind: bool,
    merge_at: float = MERGE_THRESHOLD,
    conflict_at: float = CONFLICT_THRESHOLD,
) -> Decision:
    """MERGE, CONFLICT or NEW for fact text ``new`` against one stored fact text ``existing``.

    ``merge_at`` and ``conflict_at``: the config's ``[memory] merge_threshold`` and ``conflict_threshold``.
    """
    lex = lexical_similarity(new, existing)
    trusted = cosine if cosine is not None and cosine_from_embedder else None
    if not lex.negation_mismatch:
        if lex.score > merge_at:
            return Decision(Action.MERGE, lex.score, Via.LEXICAL, lex)
        if trusted is not None and trusted > merge_at:
            return Decision(Action.MERGE, trusted, Via.EMBEDDING, lex)
    if same_kind:
        conflicts: list[tuple[float, Via]] = []
        if trusted is not None and trusted >= conflict_at:
            conflicts.append((min(trusted, merge_at), Via.EMBEDDING))
        if lex.score >= conflict_at and _lexical_conflict_gates(lex):
            conflicts.append((min(lex.score, merge_at), Via.LEXICAL))
        if conflicts:
            score, via = max(conflicts, key=lambda c: c[0])
            return Decision(Action.CONFLICT, score, via, lex)
    return Decision(Action.NEW, 0.0, None, lex)


_ACTION_RANK = {Action.MERGE: 0, Action.CONFLICT: 1}


def matches(
    candidate_text: str,
    kind: str,
    existing: Sequence[Comparable],
    cosines: Mapping[str, float] | None = None,
    *,
    merge_at: float = MERGE_THRESHOLD,
    conflict_at: float = CONFLICT_THRESHOLD,
) -> list[Match]:
    """Every stored fact the candidate merges with or conflicts with, strongest first.

    ``cosines`` maps stored ids to cosines *the embedder returned* for this candidate; an id
    missing from it (embedder down, not yet indexed) is judged lexically only. Merges rank
    before conflicts, then by score, then by ``existing`` order. Callers pass live facts only.
    """
    found: list[tuple[int, Match]] = []
    for position, memory in enumerate(existing):
        cosine = cosines.get(memory.id) if cosines is not None else None
        decision = decide(
            candidate_text,
            memory.text,
            cosine=cosine,
            cosine_from_embedder=cosine is not None,
            same_kind=str(memory.kind) == str(kind),
            merge_at=merge_at,
            conflict_at=conflict_at,
        )
        if decision.action is not Action.NEW:
            found.append((position, Match(memory.id, decision)))
    found.sort(key=lambda pm: (_ACTION_RANK[pm[1].decision.action], -pm[1].decision.score, pm[0]))
    return [match for _, match in found]


def best_match(
    candidate_text: str,
    kind: str,
    existing: Sequence[Comparable],
    cosines: Mapping[str, float] | None = None,
) -> Match | None:
    """The strongest merge, else the strongest conflict, else ``None`` (store it as new)."""
    found = matches(candidate_text, kind, existing, cosines)
    return found[0] if found else None
