"""How a stored memory reads to the people who see it.

The extractor writes memories about the person it was shown, labelled ``PERSON`` in its prompt, and
often keeps that label in the text ("PERSON lives in Berlin"). The label is the extractor's, not
anyone's word for the person: it must never be shown. :func:`person_facing` is the one place that
turns it into words, and every display of a memory's text goes through it: "you live in Berlin" in
the person's own DM, "Ana lives in Berlin" elsewhere (the operator's terminal, a group).

Pure and small on purpose: memories are one short sentence, and the rules below cover what such a
sentence does with its subject (a verb agreeing with it, a possessive, an adverb in between).
"""

from __future__ import annotations

import re
import unicodedata

PLACEHOLDER = "PERSON"
FALLBACK_NAME = "this person"  # no display name known: still a third person, so the verbs stay as written

# "PERSON" as a whole word (not "PERSONAL"), optionally possessive, optionally followed by one or two
# words: an adverb that may sit between subject and verb, and the verb.
_TOKEN = re.compile(r"\bPERSON(?P<poss>['’]s\b)?(?![\w'’])")
_NEXT_WORD = re.compile(r"(?P<space>\s+)(?P<word>[A-Za-z]+(?:['’]t)?)")

_IRREGULAR = {
    "is": "are", "was": "were", "has": "have", "does": "do", "goes": "go",
    "isn't": "aren't", "wasn't": "weren't", "hasn't": "haven't", "doesn't": "don't",
    "isn’t": "aren’t", "wasn’t": "weren’t", "hasn’t": "haven’t", "doesn’t": "don’t",
    "himself": "yourself", "herself": "yourself", "themself": "yourself", "themselves": "yourself",
}
# Words that can sit between the subject and its verb without changing the agreement.
_ADVERBS = frozenset({
    "also", "always", "often", "never", "usually", "sometimes", "still", "really", "rarely", "just",
    "already", "mostly", "only", "even", "generally", "normally", "currently", "now", "no", "longer",
})
# Third-person forms that are not verbs (or not this verb's form): left as they are.
_NOT_VERBS = frozenset({"this", "thus", "plus", "us", "yes", "as", "its", "his", "hers", "less", "unless"})


def base_form(verb: str) -> str:
    """The form a verb takes after "you", from its third-person singular ("lives" -> "live")."""
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _match_case(verb, _IRREGULAR[lower])
    if lower in _NOT_VERBS or not lower.endswith("s") or lower.endswith("ss") or len(lower) < 3:
        return verb
    if lower.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
        return verb[:-2]
    if lower.endswith("ies") and len(lower) > 4:
        return verb[:-3] + "y"
    return verb[:-1]


def _match_case(original: str, replacement: str) -> str:
    return replacement[:1].upper() + replacement[1:] if original[:1].isupper() else replacement


def _second_person(text: str) -> str:
    out: list[str] = []
    at = 0
    for match in _TOKEN.finditer(text):
        start = match.start()
        out.append(text[at:start])
        at = match.end()
        sentence_start = not text[:start].strip() or text[:start].rstrip()[-1] in ".!?:\n"
        if match.group("poss"):
            out.append("Your" if sentence_start else "your")
            continue
        out.append("You" if sentence_start else "you")
        # The subject's verb agrees with "you": look past at most two adverbs.
        for _ in range(3):
            following = _NEXT_WORD.match(text, at)
            if following is None:
                break
            word = following.group("word")
            if word.lower() in _ADVERBS:
                out.append(following.group(0))
                at = following.end()
                continue
            if not _object_position(text, start):
                out.append(following.group("space") + base_form(word))
                at = following.end()
            break
    out.append(text[at:])
    return "".join(out)


_PREPOSITIONS = frozenset({
    "with", "to", "for", "about", "of", "at", "from", "by", "like", "than", "into", "onto", "near", "without",
    "between", "among", "behind", "beside", "under", "over", "after", "before", "toward", "towards",
})
_SUBJECT_LEAD_INS = _ADVERBS | frozenset({"sometimes", "nowadays", "afterwards", "besides", "and", "or", "but",
                                          "that", "because", "when", "since", "as", "if", "while", "so"})


def _object_position(text: str, start: int) -> bool:
    """Whether the placeholder at ``start`` is an object ("Bob called PERSON", "lives with PERSON"), so the
    word after it is not its verb: after a preposition or a verb form (-ed, -s), not after a clause's start."""
    before = text[:start].rstrip()
    if not before or before[-1] in ".!?:,;\n":
        return False
    last = re.search(r"([A-Za-z]+)$", before)
    if last is None:
        return False
    word = last.group(1).lower()
    if word in _SUBJECT_LEAD_INS:
        return False
    return word in _PREPOSITIONS or word.endswith(("ed", "s"))


def _third_person(text: str, name: str) -> str:
    def name_for(match: re.Match[str]) -> str:
        before = text[:match.start()].rstrip()
        word = name[:1].upper() + name[1:] if not before or before[-1] in ".!?:\n" else name
        return word + ("'s" if match.group("poss") else "")

    return _TOKEN.sub(name_for, text)


def person_facing(text: str, *, you: bool, name: str = "") -> str:
    """``text`` with the extractor's placeholder turned into words for whoever reads it.

    ``you``: the person reads it about themselves ("PERSON lives" -> "you live", "PERSON's" -> "your").
    Otherwise ``name`` (their display name, or "this person" when none is known) stands in for it.
    """
    if PLACEHOLDER not in text:
        return text
    if you:
        return _second_person(text)
    # A display name is the platform's data: no control or format character reaches a reader.
    clean = " ".join("".join(" " if unicodedata.category(c)[0] == "C" else c for c in name).split())
    return _third_person(text, clean or FALLBACK_NAME)


__all__ = ["FALLBACK_NAME", "PLACEHOLDER", "base_form", "person_facing"]
