"""The pure core of memory: its shapes and the text rules every comparison uses. No I/O, no model.

* ``records``: a stored memory (:class:`MemoryRecord`), an extractor's proposal, a transcript turn, their
  Chroma form, and when a memory was said.
* ``text``: evidence normalisation, and the multilingual tokens of every lexical comparison.
* ``similarity``: is a new fact a repeat of a stored one, a disagreement with it, or new.
* ``bm25``: keyword ranking kept incrementally.
* ``timeline``: each chat's memories in the order they were said.
* ``vector_table``: one person's vectors as a float32 matrix, searched exactly; ``cosine`` of one pair.
* ``wording``: how a stored memory reads to the people who see it.
* ``words``: a memory's words, the person's own sentences with when and where, which is what prompts show.
"""

from memory.core.records import (
    AuthorRole,
    MemoryCandidate,
    MemoryKind,
    MemoryRecord,
    Origin,
    Scope,
    Source,
    Status,
    Tier,
    Turn,
    said_at,
)
from memory.core.text import read_lemma_dictionaries
from memory.core.wording import person_facing
from memory.core.words import Words, WordsFrom, fit_words, said_of, shown_words, words_of

__all__ = [
    "AuthorRole",
    "MemoryCandidate",
    "MemoryKind",
    "MemoryRecord",
    "Origin",
    "Scope",
    "Source",
    "Status",
    "Tier",
    "Turn",
    "Words",
    "WordsFrom",
    "fit_words",
    "person_facing",
    "read_lemma_dictionaries",
    "said_at",
    "said_of",
    "shown_words",
    "words_of",
]
