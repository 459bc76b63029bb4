"""A memory's words: what the person actually said, which is what the model reads about them.

A record's ``text`` is the extractor's paraphrase, kith's *label* for the memory: it indexes, merges, detects
conflicts and lists, and a wrong one ("PERSON lives in Paris" from "my sister lives in Paris") may mislead an
index. What reaches a prompt is :func:`words_of`: the person's own sentences, with where and when they said
them, so a wrong label can never mislead a reply.

Where the words come from, most faithful first:

* ``evidence_sentences``: the whole sentence each quote stands in (with a short take-back that followed it,
  "Not.", "haha not really", when capture kept one);
* ``evidence``: the quotes alone, literal substrings of the person's turns (records stored before whole
  sentences were kept). A /remember is kept this way too, its whole text as its one quote, so it is whole;
* nothing (a record with no receipt at all, which no current path writes): :attr:`Words.sentences` is empty
  and such a record reaches no prompt. Falling back to the label would put kith's paraphrase before the model
  as if it were known, which is the one thing this module exists to prevent.

Pure: no I/O. :func:`fit_words` cuts the words to a budget the way every prompt part does.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from memory.core.records import MemoryRecord, Origin, Scope
from persona.labels import TRUNCATED_MARK, quote, said_label, said_words

QUOTES_SEPARATOR = " "  # between two quoted sentences of one memory


class WordsFrom(enum.StrEnum):
    """Where a memory's words were found (see the module docstring)."""

    SENTENCES = "sentences"
    QUOTES = "quotes"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Words:
    """What the person said that a memory stands on, with who said it, when and where."""

    person: str
    sentences: tuple[str, ...]  # oldest first, as they were said; empty: none kept
    found_in: WordsFrom
    whole: bool  # whole sentences; False: only the words quoted from a longer sentence
    heard: bool  # the person said it (Origin.HEARD); otherwise kith read or did it
    private: bool  # said where only kith could read it (any source in a private chat makes it private)
    days: tuple[date, ...]  # the days it was said, oldest first, one each
    platforms: tuple[str, ...]  # where it was said, in the order first used
    spoken: bool = False  # some of it came as a voice note: the words are a transcript


def words_of(record: MemoryRecord) -> Words:
    """``record``'s words: its whole sentences, else its quotes, else none (never its label)."""
    if record.evidence_sentences:
        sentences, found_in, whole = record.evidence_sentences, WordsFrom.SENTENCES, True
    elif record.evidence:
        # A /remember keeps what the person wrote as both its text and its one quote: that is whole.
        sentences, found_in = record.evidence, WordsFrom.QUOTES
        whole = record.evidence == (record.text,)
    else:
        sentences, found_in, whole = (), WordsFrom.NONE, False
    said = sorted(record.sources, key=lambda s: s.timestamp)
    days = tuple(dict.fromkeys(s.timestamp.date() for s in said)) or (record.created_at.date(),)
    return Words(
        person=record.person,
        sentences=tuple(s for s in sentences if s.strip()),
        found_in=found_in,
        whole=whole,
        heard=record.origin is Origin.HEARD,
        private=record.scope is Scope.DM,
        days=days,
        platforms=tuple(dict.fromkeys(s.platform for s in said)),
        spoken=any(s.medium == "voice" for s in said),
    )


def clip_item(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to ``limit`` characters (mark included), at a word boundary when one is near."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text, False
    if limit <= len(TRUNCATED_MARK):
        return TRUNCATED_MARK[:max(0, limit)], True
    room = limit - len(TRUNCATED_MARK)
    head = text[:room]
    space = head.rfind(" ")
    if space >= room * 3 // 4:  # keep whole words unless that throws away a quarter of the room
        head = head[:space]
    return head.rstrip() + TRUNCATED_MARK, True


def fit_words(sentences: Sequence[str], limit: int) -> tuple[str, bool]:
    """The sentences, each quoted, within ``limit`` characters, and whether any was left out or cut.

    The newest are kept first (what the person said last is the most current), shown in the order said.
    When not even the newest fits whole it is cut with a visible mark, inside its quotes.
    """
    kept: list[str] = []
    used = 0
    for sentence in reversed(sentences):
        quoted = quote(" ".join(sentence.split()))
        cost = len(quoted) + (len(QUOTES_SEPARATOR) if kept else 0)
        if used + cost > limit:
            break
        kept.append(quoted)
        used += cost
    if kept:
        return QUOTES_SEPARATOR.join(reversed(kept)), len(kept) < len(sentences)
    if not sentences:
        return "", False
    room = limit
    while room > 0:
        clipped, _cut = clip_item(sentences[-1], room)
        quoted = quote(clipped)
        if len(quoted) <= limit:
            return quoted, True
        room -= len(quoted) - limit
    return "", True


def said_of(words: Words, who: str, *, unreviewed: bool = False) -> str:
    """Who said ``words``, when and where, as every prompt labels them (``who`` as the prompt names the person)."""
    return said_label(who, words.days, words.platforms, private=words.private, whole=words.whole,
                      heard=words.heard, unreviewed=unreviewed, spoken=words.spoken)


def shown_words(record: MemoryRecord, who: str, limit: int) -> str | None:
    """``record`` as a prompt shows it: who said it when and where, then its words quoted within ``limit``
    characters (the label around them not counted). ``None`` when it has no words: it is not shown at all."""
    words = words_of(record)
    quoted, _cut = fit_words(words.sentences, limit)
    return said_words(said_of(words, who), quoted) if quoted else None


__all__ = ["Words", "WordsFrom", "clip_item", "fit_words", "said_of", "shown_words", "words_of"]
