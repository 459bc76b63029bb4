"""Support, not just presence: does the person's own sentence actually say what the memory says?

A literal quote proves the person typed the words, not that the words state the memory: "I am vegan"
is a substring of "I would never say I am vegan". :func:`check_support` takes one memory's text, its
quotes and the person's turn texts they were found in, and applies these rules, in English, Polish
and German, to each quote where it stands in its turn (an occurrence that passes every rule is enough):

1. **Whole words**: the quote neither starts nor ends inside a word ("vegan" out of "vegans").
2. **A clause from its start**: the quote begins where a clause begins (the turn's or a sentence's
   start, after punctuation, or after a connective such as "and", "but", "that", "i", "że", "und",
   "dass"), or leaves off only grammar words ("I was", "ich bin"), one adverb in -ly, or one leading
   phrase of place or time ("at work", "these days", "w pracy", "seit 2019"), so whatever governs it
   is not cut off ("I am vegan" out of "I doubt I am vegan" is refused).
3. **Polarity**: the clause the quote stands in is negated ("not", "never", "n't", "nie", "nigdy",
   "nicht", "kein", ...) exactly when the memory is. The clause runs from the previous clause boundary
   (punctuation or a coordinating conjunction) to the next one, so "I'm not a fan of cats, but I love
   dogs" supports "loves dogs", while "I would never say I am vegan" does not support "is vegan". A
   comma before "that", "że", "dass" does not end the clause before it ("Nigdy nie powiedziałbym, że
   jestem weganinem").
4. **Not hypothetical**: no condition anywhere in the sentence ("if", "unless", "gdyby", "jeśli",
   "wenn", "falls"; a concession such as "even if" is not one), and no modal or hedge in the quote's
   clause ("would", "might", "maybe", "byłbym", "może", "würde", "vielleicht") unless the memory carries
   a modal or wish of its own ("would like to", "wants to").
5. **Not a question**: the sentence does not end with a question mark, nor open with "czy".
6. **Not reported**: no verb of saying, thinking or claiming, nor a hearsay word, comes before the quote
   in its sentence or inside the quote ("my friend says I am vegan", "I think", "apparently",
   "podobno", "angeblich"), nor trails it ("..., says my mum"), unless introduced by "as" ("as I said").
7. **Grounded**: every content word of the memory (its names, numbers, places and objects, and its
   verbs) appears in the quotes, allowing for inflection ("lives"/"live", "Krakowie"/"Kraków",
   "wohnt"/"wohne"); numbers must appear exactly. Words that only refer to the person ("PERSON", their
   name, pronouns), grammar words and words of wish or modality are exempt.
8. **About the person**: a sentence about someone else is not a fact about the speaker. Every word for
   another person in the quote's clause ("my sister", "in my family", "mój brat", "meine Mutter") and
   the quote's opening word when it is capitalised and not grammar ("Tom is vegan") must appear in the
   memory as well.

The sentence (or sentences) the passing occurrence stands in is returned, so the receipt keeps it whole.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ground.tunables import GROUNDING_MAX_ENDING_CHARS, PREFIX_MATCH_MIN_CHARS
from memory.text import is_stop_word, tokens, words_match


class Unsupported(enum.StrEnum):
    PARTIAL = "evidence_partial"  # cuts a word, or starts inside a clause
    NEGATED = "evidence_negated"
    HYPOTHETICAL = "evidence_hypothetical"
    QUESTION = "evidence_question"
    REPORTED = "evidence_reported"
    NOT_GROUNDED = "not_grounded"


@dataclass(frozen=True, slots=True)
class Supported:
    sentences: tuple[str, ...]  # the whole sentence each quote stands in, in quote order


def _set(*groups: str) -> frozenset[str]:
    return frozenset(w for group in groups for w in group.split())


NEGATIONS = _set(
    "not no never nor neither none nothing nobody nowhere cannot without",
    "nie nigdy nic nikt nigdzie żaden żadna żadne żadnego żadnej ani bez",
    "nicht nie niemals nichts niemand nirgends nirgendwo weder kein keine keinen keinem keiner keines ohne",
)
CONDITIONALS = _set("if unless whether suppose supposing hypothetically", "jeśli jeżeli gdyby jeśliby czy",
                    "wenn falls sofern ob angenommen")
CONCESSIVE_BEFORE_IF = _set("even as only nawet auch selbst")  # "even if", "auch wenn", "nawet jeśli"
MODALS = _set(
    "would could might may maybe perhaps possibly probably wish",
    "bym byś by byłbym byłabym byłoby mógłbym mogłabym może chyba pewnie prawdopodobnie",
    "würde würdest würden wäre wären hätte hätten könnte könnten vielleicht wahrscheinlich möglicherweise",
)
# Words that carry the modality or wish in the memory itself, and so may stand in it ungrounded.
WISH_WORDS = _set(
    "would could might may maybe perhaps possibly probably want wants wanted wish wishes hope hopes hoping "
    "plan plans planning intend intends intention dream dreams someday",
    "chce chciałby chciałaby chciałbym planuje marzy może chyba kiedyś",
    "möchte möchten will wollen wünscht hofft plant träumt würde vielleicht irgendwann",
)
REPORTING = _set(
    "say says said saying tell tells told telling claim claims claimed claiming think thinks thought "
    "believe believes believed reckon reckons guess guessed suppose supposed assume assumes assumed "
    "heard hear hears pretend pretends pretended joke jokes joked joking kidding insist insists insisted "
    "swear swears swore wrote writes according apparently allegedly supposedly reportedly rumour rumor "
    "rumoured rumored seems seemed imagine imagines imagined",
    "mówi mówią mówił mówiła mówili mówiłem mówiłam powiedział powiedziała powiedzieli powiedziałem "
    "powiedziałam twierdzi twierdzą twierdził twierdziła myśli myślą myślał myślała myślę sądzi sądzę "
    "uważa uważam uważają podobno ponoć rzekomo według słyszałem słyszałam napisał napisała pisze żartuje "
    "żartował żartowała udaje udawał udawała wydaje",
    "sagt sagen sagte sagten gesagt sage meint meinen meinte glaubt glaube glaubte glauben denkt denke "
    "dachte behauptet behauptete erzählt erzählte angeblich laut schreibt schrieb geschrieben scherzt "
    "scherzte vermutet vermute anscheinend gehört",
)
# Clause boundaries for polarity and modality: coordinators and causal connectives start a new clause.
COORDINATORS = _set(
    "and but or so yet then because since while whereas however",
    "i a ale lecz lub albo oraz więc bo ponieważ jednak zaś natomiast",
    "und aber oder sondern denn doch weil da während jedoch",
)
COMPLEMENTISERS = _set("that whether if", "że iż czy jakoby", "dass ob")
# A quote may open right after one of these as well: complementisers and discourse openers govern
# nothing by themselves (what governs is checked by the other rules).
OPENERS = COORDINATORS | _set(
    "that also plus well oh ok okay yes yeah yep no nope btw honestly actually anyway now hi hey please "
    "so though still besides",
    "że iż też także no tak cóż właściwie szczerze teraz hej cześć proszę",
    "dass auch ja nein naja übrigens eigentlich ehrlich jetzt hallo bitte also",
)
PREPOSITIONS = _set(
    "at in on since during after before for with from by until around about",
    "w we na od do po przy z ze u dla podczas",
    "in im am an auf bei seit nach vor mit von vom aus zur zum während",
)
# Words that open a leading adverbial of time: "these days", "last year", "every Monday", "heute".
TIME_OPENERS = _set(
    "these this last next every each today tonight nowadays lately recently currently usually yesterday "
    "tomorrow",
    "dziś dzisiaj teraz ostatnio zwykle codziennie wczoraj jutro obecnie zazwyczaj",
    "heute jetzt neulich meistens gestern morgen diese dieses diesen letztes letzte letzten nächste "
    "nächstes jeden jede jedes derzeit",
)
LEADING_PHRASE_MAX_WORDS = 4  # "in my old job", "bei der Arbeit"
FIRST_PERSON = _set(
    "i me my mine myself we us our ours i'm",
    "ja mnie mi mną mój moja moje mojego mojej moim moją moich my nas nasz nasza nasze",
    "ich mich mir mein meine meinen meinem meiner meines wir uns unser unsere",
)
# Words for another person: a quote holding one is about them unless the memory names them too.
OTHER_PEOPLE = _set(
    "mother mom mum mommy dad daddy father brother brothers sister sisters wife husband partner boyfriend "
    "girlfriend friend friends son sons daughter daughters kid kids child children boss colleague colleagues "
    "coworker coworkers neighbour neighbor neighbours neighbors uncle aunt cousin grandma grandmother grandpa "
    "grandfather roommate flatmate fiance fiancee parents family he she they",
    "mama mamy mamą matka matki ojciec ojca tata taty brat brata bratem siostra siostry siostrą żona żony "
    "żoną mąż męża mężem chłopak dziewczyna przyjaciel przyjaciela przyjaciółka kolega kolegi koleżanka syn "
    "syna córka córki dziecko dzieci szef szefowa sąsiad sąsiadka wujek ciocia kuzyn kuzynka babcia dziadek "
    "rodzice rodzina rodzinie rodziny rodzinę",
    "mutter mama vater papa bruder brüder schwester schwestern ehefrau ehemann partnerin freund freunde "
    "freundin freundinnen sohn tochter kinder kollege kollegin nachbar nachbarin onkel tante cousine oma "
    "opa großmutter großvater eltern familie mitbewohner",
)
# Grammar and person words that a memory may use without the quote having them.
FREE_WORDS = _set(
    "person persons user users kith they them their theirs he him his she her hers it its",
    # Naming a thing adds no claim of its own: "my dog Luna" says the dog is called Luna, and the name
    # itself must still be in the quote.
    "called named nazywa nazywają nazywał nazywała heißt heißen hieß genannt",
    "ona on ono oni one jej jego ich go mu jest są był była było",
    "ich du er sie es wir ihr ihm ihn ihnen sein seine seinen seinem seiner seines ihre ihren ihrem ihrer "
    "ist bin bist sind war waren hat habe hast haben hatte hatten wird werde wurde der die das den dem "
    "des ein eine einen einem einer eines und oder aber im am an auf aus bei mit nach von vom zu zum zur "
    "für über unter seit als wie auch noch schon sehr hier dort jetzt",
)

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s|$)")
_WORD_CHAR = re.compile(r"\w", re.UNICODE)


def _is_word_char(char: str) -> bool:
    return bool(_WORD_CHAR.match(char))


def _sentence_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence(s) holding ``text[start:end]``."""
    s, e = 0, len(text)
    for m in _SENTENCE_END.finditer(text):
        if m.end() <= start:
            s = m.end()
        elif m.start() >= end - 1 or m.end() >= end:
            e = m.end()
            break
    while s < len(text) and text[s].isspace():
        s += 1
    return s, e


def _whole_words(text: str, start: int, end: int) -> bool:
    if start > 0 and _is_word_char(text[start - 1]) and _is_word_char(text[start]):
        return False
    if end < len(text) and _is_word_char(text[end - 1]):
        after = text[end]
        if _is_word_char(after):
            return False
        # "doctor" out of "doctor's": an apostrophe followed by a letter continues the word.
        if after in "'’" and end + 1 < len(text) and text[end + 1].isalpha():
            return False
    return True


def _clause_starts_at(text: str, sentence_start: int, start: int) -> bool:
    """Rule 2: what the quote leaves off its clause's start is nothing, grammar, or one leading phrase."""
    before = text[sentence_start:start]
    cut = 0
    for m in _HEAD_BOUNDARY_RE.finditer(before):
        cut = m.end()
    head = tokens(before[cut:])
    for i in range(len(head) - 1, -1, -1):
        if head[i] in OPENERS:
            head = head[i + 1:]
            break
    if all(is_stop_word(w) for w in head):
        return True
    if len(head) == 1 and head[0].endswith("ly"):  # "secretly", "honestly"
        return True
    return (head[0] in PREPOSITIONS or head[0] in TIME_OPENERS) and len(head) <= LEADING_PHRASE_MAX_WORDS


_BOUNDARY_RE = re.compile(r"[,;:()]|\s[-–—]\s")
# Where a clause may open: punctuation, a dash between spaces, an opening quotation mark.
_HEAD_BOUNDARY_RE = re.compile(r"[,;:()…\"“„«]|\s[-–—]\s|(?:^|\s)['‘]")


def _clause_around(sentence: str, start: int, end: int) -> str:
    """The clause(s) of ``sentence`` holding ``sentence[start:end]``: from the last boundary before the quote to
    the first one after it. Boundaries are punctuation and coordinating conjunctions."""
    head = sentence[:start]
    cut = 0
    for m in _BOUNDARY_RE.finditer(head):
        # Polish and German set a comma before "że"/"dass": the clause it opens stays governed by the one before.
        following = tokens(head[m.end():m.end() + 12])
        if m.group() == "," and following and following[0] in COMPLEMENTISERS:
            continue
        cut = m.end()
    words = list(re.finditer(r"\w+(?:['’]\w+)*", head))
    for m in words:
        if m.start() >= cut and m.group().casefold() in COORDINATORS:
            cut = m.end()
    tail = sentence[end:]
    stop = len(tail)
    boundary = _BOUNDARY_RE.search(tail)
    if boundary is not None:
        stop = boundary.start()
    for m in re.finditer(r"\w+(?:['’]\w+)*", tail[:stop]):
        if m.group().casefold() in COORDINATORS:
            stop = m.start()
            break
    return sentence[cut:start] + sentence[start:end] + tail[:stop]


def _has(words: Iterable[str], lexicon: frozenset[str]) -> bool:
    return any(w in lexicon for w in words)


# Polish and German verbs of saying and thinking inflect too much for a word list: their stems.
REPORTING_STEMS = (
    "powiedzia", "powiedzie", "mówi", "mówił", "twierdz", "myśla", "myśle", "sądz", "uważa", "słysza", "napisa",
    "żartow", "udawa", "gesagt", "behaupt", "glaubt", "meint", "erzähl", "vermut", "scherz",
)


def _reporting(word: str) -> bool:
    return word in REPORTING or word.startswith(REPORTING_STEMS)


def _negated(text: str) -> bool:
    return _has(tokens(text), NEGATIONS)


# Polish glues its conditional to the word: "gdybym", "jadłbym", "byłabyś", "zrobiliby".
_POLISH_CONDITIONAL = re.compile(r"^gdyby|ł[aoy]?by(?:m|ś|śmy|ście)?$|liby(?:śmy|ście)?$")


def _modal(words: Sequence[str]) -> bool:
    return any(w in MODALS or _POLISH_CONDITIONAL.search(w) for w in words)


def _conditional(sentence_words: Sequence[str]) -> bool:
    for i, word in enumerate(sentence_words):
        conditional = word in CONDITIONALS or word.startswith("gdyby")
        if conditional and not (i > 0 and sentence_words[i - 1] in CONCESSIVE_BEFORE_IF):
            # Polish "czy" opens a question or "whether": either way the clause is not asserted.
            return True
    return False


def _question(sentence: str) -> bool:
    stripped = sentence.rstrip(" \"'”’»)]")
    words = tokens(sentence)
    return stripped.endswith("?") or (bool(words) and words[0] == "czy")


def _reported(sentence: str, start: int, end: int) -> bool:
    if any(_reporting(w) for w in tokens(sentence[:end])):
        return True
    tail = tokens(sentence[end:])
    for i, word in enumerate(tail):
        if _reporting(word) and not (i > 0 and tail[i - 1] in {"as", "jak", "wie"}) and not (
            i > 1 and tail[i - 2] in {"as", "jak", "wie"}
        ):
            return True
    return False


def _grounded_word(word: str, quote_words: Sequence[str]) -> bool:
    if word.isdigit():
        return word in quote_words
    for other in quote_words:
        if words_match(word, other):
            return True
        # Inflection across the three languages ("wohnt"/"wohne", "Kraków"/"Krakowie"): a shared stem of
        # at least PREFIX_MATCH_MIN_CHARS letters with short endings either side.
        common = 0
        for a, b in zip(word, other, strict=False):
            if a != b:
                break
            common += 1
        if (
            common >= PREFIX_MATCH_MIN_CHARS
            and len(word) - common <= GROUNDING_MAX_ENDING_CHARS
            and len(other) - common <= GROUNDING_MAX_ENDING_CHARS
        ):
            return True
    return False


def ungrounded_words(text: str, quotes: Sequence[str], person_words: frozenset[str] = frozenset()) -> list[str]:
    """The content words of a memory's ``text`` that none of its ``quotes`` has (rule 7)."""
    quote_words = [w for q in quotes for w in tokens(q)]
    missing = []
    for word in tokens(text):
        if is_stop_word(word) and not word.isdigit():
            continue
        if word in FREE_WORDS or word in WISH_WORDS or word in person_words:
            continue
        if not _grounded_word(word, quote_words):
            missing.append(word)
    return missing


_CAPITALISED_START = re.compile(r"^\W*(?P<word>[^\W\d_][\w'’]*)")


def _about_someone_else(quote: str, clause: str, memory: str) -> bool:
    """Rule 8: the quote's clause speaks of another person (a word for them, or the quote's capitalised
    subject) that the memory leaves out: "I have diabetes" out of "I have diabetes in my family" too."""
    memory_words = tokens(memory)
    others = [w for w in tokens(clause) if w in OTHER_PEOPLE]
    opening = _CAPITALISED_START.match(quote)
    if opening is not None and opening.group("word")[0].isupper():
        first = tokens(opening.group("word"))
        if first and not is_stop_word(first[0]) and first[0] not in FIRST_PERSON | FREE_WORDS | OPENERS:
            others.append(first[0])
    return any(not _grounded_word(w, memory_words) for w in others)


def _occurrences(text: str, quote: str) -> Iterable[int]:
    start = text.find(quote)
    while start != -1:
        yield start
        start = text.find(quote, start + 1)


def _judge_occurrence(text: str, quote: str, start: int, memory: str) -> Unsupported | str:
    """One place ``quote`` stands in ``text``: the reason it does not support ``memory``, or its sentence."""
    end = start + len(quote)
    if not _whole_words(text, start, end):
        return Unsupported.PARTIAL
    s, e = _sentence_span(text, start, end)
    sentence = text[s:e]
    if not _clause_starts_at(text, s, start):
        return Unsupported.PARTIAL
    local_start, local_end = start - s, end - s
    if _question(sentence) or "?" in quote:
        return Unsupported.QUESTION
    if _reported(sentence, local_start, local_end):
        return Unsupported.REPORTED
    clause = _clause_around(sentence, local_start, local_end)
    if _about_someone_else(quote, clause, memory):
        return Unsupported.NOT_GROUNDED
    if _negated(clause) != _negated(memory):
        return Unsupported.NEGATED
    if _conditional(tokens(sentence)):
        return Unsupported.HYPOTHETICAL
    if _modal(tokens(clause)) and not _has(tokens(memory), WISH_WORDS):
        return Unsupported.HYPOTHETICAL
    return sentence


# The reasons in the order they are reported when no occurrence of a quote passes: the most telling first.
_PRIORITY = [Unsupported.NOT_GROUNDED, Unsupported.NEGATED, Unsupported.REPORTED, Unsupported.HYPOTHETICAL,
             Unsupported.QUESTION, Unsupported.PARTIAL]


def check_support(
    memory: str, quotes: Sequence[str], turn_texts: Sequence[Sequence[str]], person_words: frozenset[str]
) -> Supported | Unsupported:
    """Whether ``quotes`` support ``memory``. ``turn_texts[i]`` are the (normalised) texts of the person's own
    turns that hold ``quotes[i]``; ``person_words`` the tokens the memory may use to name the person."""
    sentences: list[str] = []
    for quote, texts in zip(quotes, turn_texts, strict=True):
        found: str | None = None
        reasons: set[Unsupported] = set()
        for text in texts:
            for start in _occurrences(text, quote):
                outcome = _judge_occurrence(text, quote, start, memory)
                if isinstance(outcome, Unsupported):
                    reasons.add(outcome)
                else:
                    found = outcome
                    break
            if found is not None:
                break
        if found is None:
            return next((r for r in _PRIORITY if r in reasons), Unsupported.PARTIAL)
        sentences.append(found)
    if ungrounded_words(memory, quotes, person_words):
        return Unsupported.NOT_GROUNDED
    return Supported(tuple(sentences))
