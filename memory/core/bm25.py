"""Okapi BM25 keyword ranking over memory texts, kept incrementally in memory.

Documents are indexed by their :func:`memory.core.text.content_words` (stop words never enter
the index, so no posting list grows with every document). A query word also matches the
index words :func:`memory.core.text.words_match` accepts (postgres/postgresql, Warszawa/
Warszawie); all forms of one query word are scored as a single term, with the document
frequency of their union, so a word's inflections are not counted twice.

Cost: adding a document is O(its words) plus a sorted insert per word never seen before;
a query touches only the posting lists of its own words, which keeps a 100k-document
index in the low milliseconds. The index is not thread-safe; the store owns one per
collection and mutates it from one task.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from ground.tunables import (
    BM25_B,
    BM25_K1,
    PREFIX_MATCH_MIN_CHARS,
)
from memory.core.text import INFLECTION_MIN_STEM_CHARS, content_words, is_cjk_token, words_match

# Query words shorter than this only match exactly (no prefix/inflection expansion).
_EXPAND_PREFIX_CHARS = min(PREFIX_MATCH_MIN_CHARS, INFLECTION_MIN_STEM_CHARS)


class BM25Index:
    """An inverted index of ``id -> text`` that ranks ids for a query."""

    def __init__(self, *, k1: float = BM25_K1, b: float = BM25_B) -> None:
        self._k1 = k1
        self._b = b
        self._postings: dict[str, dict[str, int]] = {}  # word -> {doc id: term frequency}
        self._doc_words: dict[str, tuple[str, ...]] = {}  # distinct words, for removal
        self._doc_len: dict[str, int] = {}
        self._total_len = 0
        self._vocabulary: list[str] = []  # sorted, for prefix expansion

    def __len__(self) -> int:
        return len(self._doc_len)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._doc_len

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id``, replacing what that id held before."""
        self.remove(doc_id)
        words = content_words(text)
        counts = Counter(words)
        self._doc_words[doc_id] = tuple(counts)
        self._doc_len[doc_id] = len(words)
        self._total_len += len(words)
        for word, count in counts.items():
            posting = self._postings.get(word)
            if posting is None:
                posting = self._postings[word] = {}
                bisect.insort(self._vocabulary, word)
            posting[doc_id] = count

    def add_many(self, docs: Iterable[tuple[str, str]]) -> None:
        for doc_id, text in docs:
            self.add(doc_id, text)

    def remove(self, doc_id: str) -> bool:
        """Drop ``doc_id``; ``False`` when it was not indexed."""
        words = self._doc_words.pop(doc_id, None)
        if words is None:
            return False
        self._total_len -= self._doc_len.pop(doc_id)
        for word in words:
            posting = self._postings[word]
            del posting[doc_id]
            if not posting:
                del self._postings[word]
                position = bisect.bisect_left(self._vocabulary, word)
                del self._vocabulary[position]
        return True

    def _forms(self, word: str) -> list[str]:
        """Index words that count as ``word``."""
        if len(word) < _EXPAND_PREFIX_CHARS or is_cjk_token(word) or word.isdigit():
            return [word] if word in self._postings else []
        # Every accepted form shares at least the first few letters with the query word.
        prefix = word[:_EXPAND_PREFIX_CHARS]
        start = bisect.bisect_left(self._vocabulary, prefix)
        forms: list[str] = []
        for candidate in self._vocabulary[start:]:
            if not candidate.startswith(prefix):
                break
            if words_match(word, candidate):
                forms.append(candidate)
        return forms

    def search(self, query: str, k: int, allowed_ids: AbstractSet[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(id, score)`` pairs for ``query``, best first; only ids with a match.

        ``allowed_ids`` restricts the ranking to those ids (one person's live memories).
        """
        if k <= 0 or not self._doc_len:
            return []
        doc_count = len(self._doc_len)
        average_len = self._total_len / doc_count or 1.0
        flat = self._k1 * (1.0 - self._b)
        slope = self._k1 * self._b / average_len
        boost = self._k1 + 1.0
        doc_len = self._doc_len
        scores: dict[str, float] = {}
        for word in dict.fromkeys(content_words(query)):
            postings = [self._postings[form] for form in self._forms(word)]
            if not postings:
                continue
            # The forms of one word act as one term. A document holding two forms is counted
            # once per form here, so df is an upper bound; the exact union would cost a merge.
            df = min(doc_count, sum(map(len, postings)))
            idf = math.log(1.0 + (doc_count - df + 0.5) / (df + 0.5))
            pairs: Iterable[tuple[str, int]]
            if allowed_ids is not None and len(allowed_ids) < df:
                # One person's memories are usually far fewer than a common word's postings.
                pairs = ((doc_id, sum(p.get(doc_id, 0) for p in postings)) for doc_id in allowed_ids)
            elif len(postings) == 1:
                pairs = postings[0].items()
            else:
                merged: Counter[str] = Counter()
                for posting in postings:
                    merged.update(posting)
                pairs = merged.items()
            for doc_id, tf in pairs:
                if not tf or (allowed_ids is not None and doc_id not in allowed_ids):
                    continue
                gain = idf * tf * boost / (tf + flat + slope * doc_len[doc_id])
                scores[doc_id] = scores.get(doc_id, 0.0) + gain
        return heapq.nlargest(k, scores.items(), key=lambda item: (item[1], item[0]))


def normalize_scores(results: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scale scores into 0..1 by the best one (the top result gets 1.0), keeping order.

    BM25 scores have no fixed scale, so blending them with cosines needs this; note the top
    hit gets 1.0 however weak it is in absolute terms.
    """
    if not results:
        return []
    top = max(score for _, score in results)
    if top <= 0.0:
        return [(doc_id, 0.0) for doc_id, _ in results]
    return [(doc_id, score / top) for doc_id, score in results]
