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
  It decides *same fact or not* only: a rewording ("lives in Gdańsk" / "is based in Gdańsk")
  merges when the cosine is above ``MEANING_MERGE_THRESHOLD`` (chosen from labelled pairs:
  ``bench/dedupe_threshold.py``), unless :func:`disagree` finds the two facts differ in what a
  fact turns on. "Lives in Gdańsk" and "lives in Sopot" are close in embedding space; the
  cosine says they are about the same thing, never that they say the same thing.

:func:`disagree` is structural, in any language: the two facts differ in a name or a number
(each side has one the other lacks: another place, person, amount, date or time; number words
read as their value, so "two" is "2"), or they are one frame with one word swapped (at least
``SUBSTITUTION_MIN_SHARED`` content words shared and exactly one left over on each side:
"drinks coffee every morning" / "drinks tea every morning"). A negation on one side only is
the guard below.

Decision: MERGE, unless the two facts :func:`disagree`, when the lexical layer scores above
``MERGE_THRESHOLD`` or the embedding layer above ``MEANING_MERGE_THRESHOLD``. Otherwise, for facts of
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
import functools
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from num2words import num2words

from ground.tunables import (
    CONFLICT_MIN_AGREEMENTS,
    CONFLICT_MIN_JACCARD,
    CONFLICT_MIN_WORDS,
    CONFLICT_THRESHOLD,
    DISTINCTIVE_MIN_CHARS,
    MEANING_MERGE_THRESHOLD,
    MERGE_THRESHOLD,
    NUMBER_WORDS_UP_TO,
    SHORT_FACT_MAX_WORDS,
    SINGLE_WORD_LINK_SCORE,
    SUBSTITUTION_MIN_SHARED,
)
from memory.core.text import is_cjk_token, is_negation, is_stop_word, tokens, words_match


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


def _shared_words(a: AbstractSet[str], b: AbstractSet[str]) -> list[str]:
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


# Negation words of languages memory.core.text's list does not cover yet (German, French, Spanish, Italian,
# Portuguese), for the guard only: "mag Katzen" / "mag keine Katzen" must never merge.
_MORE_NEGATIONS = frozenset(
    "nicht kein keine keinen keinem keiner keines niemals nirgends "
    "ne pas jamais aucun aucune personne rien "
    "nunca jamás ningún ninguna ninguno nada nadie "
    "non mai nessuno nessuna niente nulla não nenhum nenhuma".split()
)


def _negated(words: Sequence[str]) -> bool:
    return any(is_negation(w) or w in _MORE_NEGATIONS for w in words)


@dataclass(frozen=True, slots=True)
class FactWords:
    """What the comparisons read of one fact text, read once: a gate compares a candidate with every stored fact
    it found, and each comparison needs these of both sides several times over."""

    content: frozenset[str]  # its content words (memory.core.text.content_words)
    negated: bool
    frame: frozenset[str]  # the content words its frame is made of (:func:`_frame_words`)
    pivots: tuple[str, ...]  # its names and numbers (:func:`pivots`)


def read_fact(text: str) -> FactWords:
    """``text`` read for :func:`lexical_similarity`, :func:`disagree` and :func:`decide`, tokenised once."""
    words = tokens(text)
    content = [w for w in words if not is_stop_word(w)]
    return FactWords(frozenset(content), _negated(words), _frame_words(words[:1], content), tuple(pivots(text)))


def lexical_similarity(a: str, b: str) -> LexicalScore:
    """The lexical score of two fact texts (symmetric), over their content words, with whether one is negated."""
    return _lexical_similarity(read_fact(a), read_fact(b))


def _lexical_similarity(a: FactWords, b: FactWords) -> LexicalScore:
    words_a, words_b = a.content, b.content
    negation_mismatch = a.negated != b.negated
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


# Languages whose number words are read as their value. 0 and 1 are left out: "a", "one", "een", "un" are
# articles as often as numbers, and "has a dog" / "has one dog" must not differ.
NUMBER_WORD_LANGUAGES = ("en", "pl", "de", "fr", "es", "it", "pt", "nl")
# A run of letters and digits ("SQLite3" is one name, "5km" one number), a number keeping its separators
# ("1,200", "72.5", "12.05.1990", "10:30").
_PIVOT_TOKEN_RE = re.compile(r"[^\W_]+(?:[.,:/]\d+)*")
_SENTENCE_END_RE = re.compile(r"[.!?…。！？]")


@functools.cache
def number_words() -> dict[str, str]:
    """Every one-word number word from 2 to ``NUMBER_WORDS_UP_TO`` in :data:`NUMBER_WORD_LANGUAGES`, case-folded,
    to its value as digits (num2words is a maintained lexicon of them; inflected forms it does not give,
    such as Polish "dwie", stay words)."""
    found: dict[str, str] = {}
    for language in NUMBER_WORD_LANGUAGES:
        for value in range(2, NUMBER_WORDS_UP_TO + 1):
            word = num2words(value, lang=language).casefold()
            if _PIVOT_TOKEN_RE.fullmatch(word):
                found.setdefault(word, str(value))
    return found


def pivots(text: str) -> list[str]:
    """What a fact turns on, as comparable tokens: its numbers (separators read alike: "1,200" is "1.200"; a
    number word is its value) and its names (a capitalised word that does not open a sentence, case-folded)."""
    text = unicodedata.normalize("NFKC", text)
    found: list[str] = []
    previous_end = 0
    for match in _PIVOT_TOKEN_RE.finditer(text):
        token = match.group()
        opens_sentence = previous_end == 0 or bool(_SENTENCE_END_RE.search(text, previous_end, match.start()))
        previous_end = match.end()
        if token[0].isdigit():
            found.append(token.replace(",", "."))
        elif (value := number_words().get(token.casefold())) is not None:
            found.append(value)
        elif token[0].isupper() and not opens_sentence and not is_stop_word(token.casefold()):
            found.append(token.casefold())  # a stop word ("PERSON", the extractor's placeholder) names no one
    return found


def _unmatched(words: Sequence[str], others: Sequence[str]) -> list[str]:
    """Words of ``words`` with no match (:func:`memory.core.text.words_match`; numbers only exactly) in ``others``."""
    return [w for w in words if not any(w == o or (not w[0].isdigit() and words_match(w, o)) for o in others)]


def _frame_words(opening: Sequence[str], content: Sequence[str]) -> frozenset[str]:
    """The content words a fact's frame is made of, from its ``content`` words and its ``opening`` (first) token.
    Its first word is left out: it is the fact's subject, the person nearly always (the extractor's "PERSON", or
    their name), shared by every fact about them and no part of what one says. Words of one or two letters
    ("en", "à", "im") are function words in the languages whose stop words :mod:`memory.core.text` does not list
    yet, numbers aside."""
    return frozenset(w for w in content if (len(w) > 2 or w.isdigit()) and w not in opening)


def disagree(a: str, b: str) -> bool:
    """Whether two facts differ in what a fact turns on, so no cosine may call them one fact: each has a name or
    number the other lacks; or one has a number the other lacks while the other has a word of its own in its
    place (a number word no lexicon knows, Polish "dwie"); or both are one frame with one content word swapped."""
    return _disagree(read_fact(a), read_fact(b))


def _disagree(a: FactWords, b: FactWords) -> bool:
    only_a, only_b = _unmatched(a.pivots, b.pivots), _unmatched(b.pivots, a.pivots)
    if only_a and only_b:
        return True
    words_a, words_b = a.frame, b.frame
    shared = len(_shared_words(words_a, words_b))
    extra_a, extra_b = len(words_a) - shared, len(words_b) - shared
    number = (any(p[0].isdigit() for p in only_a) and extra_b) or (any(p[0].isdigit() for p in only_b) and extra_a)
    return bool(number) or (shared >= SUBSTITUTION_MIN_SHARED and extra_a == 1 and extra_b == 1)


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
    meaning_at: float = MEANING_MERGE_THRESHOLD,
) -> Decision:
    """MERGE, CONFLICT or NEW for fact text ``new`` against one stored fact text ``existing``.

    ``merge_at`` and ``conflict_at``: the config's ``[memory] merge_threshold`` and ``conflict_threshold``;
    ``meaning_at``: the cosine above which a trusted one calls two facts that do not :func:`disagree` one.
    """
    return _decide(read_fact(new), read_fact(existing), cosine=cosine, cosine_from_embedder=cosine_from_embedder,
                   same_kind=same_kind, merge_at=merge_at, conflict_at=conflict_at, meaning_at=meaning_at)


def _decide(
    new: FactWords,
    existing: FactWords,
    *,
    cosine: float | None,
    cosine_from_embedder: bool,
    same_kind: bool,
    merge_at: float,
    conflict_at: float,
    meaning_at: float,
) -> Decision:
    lex = _lexical_similarity(new, existing)
    trusted = cosine if cosine is not None and cosine_from_embedder else None
    # Neither layer merges two facts that differ in what they turn on ("earns 1,200" / "earns 200" share most
    # of their words): they are judged as a possible conflict instead.
    if not lex.negation_mismatch and not _disagree(new, existing):
        if lex.score > merge_at:
            return Decision(Action.MERGE, lex.score, Via.LEXICAL, lex)
        if trusted is not None and trusted > meaning_at:
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
    meaning_at: float = MEANING_MERGE_THRESHOLD,
) -> list[Match]:
    """Every stored fact the candidate merges with or conflicts with, strongest first.

    ``cosines`` maps stored ids to cosines *the embedder returned* for this candidate; an id
    missing from it (embedder down, not yet indexed) is judged lexically only. Merges rank
    before conflicts, then by score, then by ``existing`` order. Callers pass live facts only.
    """
    found: list[tuple[int, Match]] = []
    candidate = read_fact(candidate_text)
    for position, memory in enumerate(existing):
        cosine = cosines.get(memory.id) if cosines is not None else None
        decision = _decide(
            candidate,
            read_fact(memory.text),
            cosine=cosine,
            cosine_from_embedder=cosine is not None,
            same_kind=str(memory.kind) == str(kind),
            merge_at=merge_at,
            conflict_at=conflict_at,
            meaning_at=meaning_at,
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
