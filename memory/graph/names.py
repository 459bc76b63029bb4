"""How names and relation words compare: pure functions, no I/O.

* :func:`name_key`: one name however it is typed (case, look-alike letters, spacing, a trailing possessive), so an
  exact-name duplicate can never become a second entity.
* :func:`relation_key`: one relation however it is inflected or padded ("lives in", "lived in", "is living in"
  are ``live``), which is what a contradiction compares.
* :func:`role_key`: a name that is a role of the person's own ("my sister", "meine Schwester", "moja siostra")
  read as that role, so it can be matched to the one relation that names it.
* :func:`extends`: "Ola K." is "Ola" with an initial: the same name said more fully.
"""

from __future__ import annotations

import re

from memory.core.text import fold, is_stop_word, lemmas, tokens

# First-person possessives, in the languages the support rules read: grammar, not facts about anybody.
_MY = frozenset(
    "my mine our "
    "mein meine meinen meinem meiner meines unser unsere "
    "mój moja moje mojego mojej moim mojemu nasz nasza nasze "
    "mon ma mes notre nos "
    "mi mis nuestro nuestra".split()
)
_POSSESSIVE_TAIL = re.compile(r"(?:'s|'|’s|’)$")
_INITIAL = re.compile(r"^[^\W\d_]$")
_PUNCTUATION = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~“”„«»‹›…–—'’"


def name_key(name: str) -> str:
    """``name`` as names compare: folded (case, look-alikes, spacing), a trailing possessive dropped."""
    words = [_POSSESSIVE_TAIL.sub("", w.strip(_PUNCTUATION.replace("'", "").replace("’", ""))).strip(_PUNCTUATION)
             for w in fold(name).split()]
    return " ".join(w for w in words if w)


def _dictionary_form(token: str) -> str:
    """One stable dictionary form of ``token``: the shortest of its lemmas (ties alphabetical), so "lives",
    "lived" and "living" meet on "live"."""
    return min(lemmas(token), key=lambda form: (len(form), form))


def relation_key(relation: str) -> str:
    """The content words of ``relation`` in dictionary form: how two relations are the same type."""
    words = [_dictionary_form(t) for t in tokens(relation) if not is_stop_word(t)]
    return " ".join(words) or " ".join(tokens(relation))


def role_key(name: str) -> str | None:
    """The relation key of a role the person names as their own ("my sister" -> ``sister``), else None."""
    words = fold(name).split()
    if len(words) < 2 or words[0] not in _MY:
        return None
    return relation_key(" ".join(words[1:])) or None


def extends(short: str, long: str) -> bool:
    """Whether name ``long`` is ``short`` with initials after it ("Ola" -> "Ola K.", "Jan" -> "Jan B. K.")."""
    a, b = name_key(short).split(), name_key(long).split()
    if not a or len(b) <= len(a) or b[: len(a)] != a:
        return False
    return all(_INITIAL.match(w) for w in b[len(a):])
