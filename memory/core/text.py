"""Text normalisation and the multilingual tokens every lexical comparison uses.

Two different jobs live here and must not be confused:

* :func:`normalize` is for *evidence*: NFC plus whitespace folding and nothing else, so a
  quote still has to match the transcript literally (case, punctuation and spelling count).
* :func:`tokens` / :func:`content_words` / :func:`words_match` are for *matching* (the
  merge/conflict gate and BM25): case-folded, NFKC, script-aware.
* :func:`fold` is for *recognising* what a text says however it is spelled (the instruction and
  authority rules, the support rules): every default-ignorable and bidirectional-control character
  removed (:func:`ground.visible_text.visible`, the one definition redaction uses too: zero-width
  characters, variation selectors, right-to-left overrides), NFKC, then the confusables skeleton: every
  character that Unicode's confusables table lists as a look-alike of ASCII letters or digits
  (Cyrillic "о", Greek "ο", Coptic "ⲟ", dotless "ı", ...) replaced by them, case-folded. It never
  touches what is stored.

Tokenisation by script:

* space-separated scripts (Latin, Cyrillic, Greek, Devanagari, ...) give whole words,
  combining marks included, so Polish "zażółć" or Hindi "हिन्दी" is one token;
  "don't" gives "do" + "not" so negation survives as a word;
* Han and kana (Chinese, Japanese) give overlapping character bigrams, after the run is
  split at function characters (的 了 是, の は が を に で, ...), so text without spaces
  still matches; a one-character piece stays a unigram (a lone hiragana is grammar: a stop word);
* Hangul gives bigrams too, because Korean particles attach to the word ("서울에서").

Lexical matching cannot see meaning: "psa"/"pies" (stem alternation) or a
Japanese verb's conjugations will not match; that is the embedder's job.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

from confusable_homoglyphs.confusables import confusables_data

from ground.tunables import (
    INFLECTION_MIN_STEM_CHARS,
    PREFIX_MATCH_MIN_CHARS,
)
from ground.visible_text import visible


def normalize(text: str) -> str:
    """NFC, then every run of whitespace becomes one space, then strip. No case folding."""
    return " ".join(unicodedata.normalize("NFC", text).split())


@functools.cache
def _confusable_folds() -> dict[int, str]:
    """Every non-ASCII character Unicode's confusables table lists as a look-alike of ASCII letters or digits
    -> those, lower-cased: the skeleton of a word, so Cyrillic "о", Greek "ο" and Coptic "ⲟ" read as "o",
    and a ligature such as "ǉ" as "lj". Only targets made of letters and digits count, so punctuation
    ("…", curly quotes) keeps its meaning, and letters with diacritics (Polish "ą", German "ä") are not in
    the table."""
    folds: dict[int, str] = {}
    for char, glyphs in confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue
        for glyph in glyphs:
            target = glyph["c"]
            if target.isascii() and target.isalnum():
                folds[ord(char)] = target.lower()
                break
    return folds


def fold(text: str) -> str:
    """``text`` as a matcher should read it: invisible characters dropped, NFKC, ASCII look-alikes folded
    to ASCII, case-folded, curly apostrophes straightened, whitespace folded. For recognising, never
    for storing or quoting."""
    folded = unicodedata.normalize("NFKC", visible(text)).translate(_confusable_folds()).casefold()
    return " ".join(folded.replace("’", "'").replace("‘", "'").split())


def _mark_class() -> str:
    """A regex class of every BMP combining mark (Mn/Mc/Me), which ``\\w`` does not cover."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x10000):
        if unicodedata.category(chr(code))[0] != "M":
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return "".join(f"\\u{lo:04x}-\\u{hi:04x}" if lo != hi else f"\\u{lo:04x}" for lo, hi in ranges)


_HAN_KANA = (
    "\u3005\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
_HIRAGANA_RE = re.compile("[\u3040-\u309f]")
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_MARKS = _mark_class()
_LETTER = rf"[^\W_{_HAN_KANA}{_HANGUL}][{_MARKS}]*"
_TOKEN_RE = re.compile(
    rf"(?P<han>[{_HAN_KANA}]+)"
    rf"|(?P<hangul>[{_HANGUL}]+)"
    rf"|(?P<word>(?:{_LETTER})+(?:['’](?:{_LETTER})+)*)"
)
_CJK_TOKEN_RE = re.compile(rf"[{_HAN_KANA}{_HANGUL}]")

# Characters that are (almost always) grammar in Chinese and Japanese: a run is split at
# them so they neither swamp the bigrams nor glue content characters together.
CJK_FUNCTION_CHARS = frozenset(
    "的了着过是在和与及也就吗呢吧啊呀哦嗯我你您他她它们这那个把被很还又而之于"  # Chinese
    "のはがをにでともへやかねよ私僕俺"  # Japanese particles and "I"
)

_ENGLISH_STOP = """
a about above after again against all also am an and any are as at be been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself of off on once only or other our ours ourselves out over own same
she should so some such than that the their theirs them themselves then there these they this
those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves
im ive id ill youre youve hes shes its were theyre thats theres lets
ca wo sha s t m d ll re ve
get gets got getting go goes going gone make makes made really quite actually basically
currently now still already always usually often sometimes maybe probably
thing things stuff something anything everything lot lots kind sort bit
use uses used using database databases project projects
user users person people someone
yes yeah yep ok okay sure thanks thank please hi hello hey well oh
"""

_POLISH_STOP = """
a aby ale albo ani az bo by byc byl byla bylo byly być był była było były będzie będę
chce chcę co czy czyli dla do dość gdy gdyż gdzie go i ich ile im inna inne inny ja jak jaka
jaki jakie jako je jego jej jest jestem jesteś jesteśmy już ku lub ma mają mam mamy mi mnie
mną mną moi moich moim moja moje mojego mojej mojemu mój mu my na nad nam nami nas nasz nasza
nasze naszego o od oraz po pod przed przez przy sie się są ta tak tam te teraz tego tej ten
to tu tutaj ty tych tym u w we wiec więc wszystko z za ze że żeby też także bardzo tylko
coś cos ktoś ktos który która które którego której hej cześć dzięki dziękuję proszę
"""

# Korean bigrams and syllables that are particles, pronouns or verb endings.
_HANGUL_STOP = """
저 나 제 내 너 그 이 가 은 는 을 를 에 의 도 와 과 로 좀 더 잘
저는 나는 제가 내가 저의 나의 우리 너는 그리 리고 그래 입니 니다 습니 어요 아요 해요
에서 에게 하고 으로 있어 있습 합니 했어 했습 이에 예요 이야
"""

_KANA_STOP = "ます まし した して いる ある こと これ それ あれ"  # bigrams; で, の, も split runs already

STOP_WORDS = frozenset((_ENGLISH_STOP + _POLISH_STOP + _HANGUL_STOP + _KANA_STOP).split()) | CJK_FUNCTION_CHARS

# Negations are content words (never stop words): "I like tea" and "I don't like tea"
# must not look identical to the merge gate.
NEGATION_WORDS = frozenset(
    "not no never nor neither none nothing nobody nie nigdy nic żaden żadna żadne 안 못 ない".split()
)
NEGATION_CHARS = frozenset("不没沒别別无無않못")

# Inflectional endings (mostly Polish, plus English plurals/tenses) two forms of one word
# may differ by once they share a stem. Three-letter stems only take the nominal endings,
# so "tea"/"team" stay apart while "kot"/"kota"/"kotem" match.
_SHORT_STEM_SUFFIXES = frozenset(["", *"a e i o u y ą ę em om ie ów ach ami owi s es".split()])
INFLECTION_SUFFIXES = _SHORT_STEM_SUFFIXES | frozenset(
    (
        "ia iu ii ią ię iem iom iach iami owie ego emu ej ym im ych ich ymi imi "  # nouns, adjectives
        "m sz my cie ją ć ł ła ło li ły łem łam łeś łaś "  # verbs
        "ed ing"  # English
    ).split()
)


_CLITICS = frozenset(["s", "m", "re", "ve", "ll", "d"])  # it's, I'm, you're, we've, I'll, I'd
# French (and Italian) elide a short word onto the next: "j'habite" is "je habite", "n'aime" is "ne aime", so
# the verb is a word of its own and the negator stays one.
_ELIDED = {"j": "je", "n": "ne", "l": "le", "d": "de", "m": "me", "t": "te", "s": "se", "c": "ce", "qu": "que",
           "jusqu": "jusque", "lorsqu": "lorsque", "puisqu": "puisque"}


def _word_tokens(word: str) -> list[str]:
    if "'" not in word and "’" not in word:
        return ["can", "not"] if word == "cannot" else [word]
    word = word.replace("’", "'")
    if word.endswith("n't"):
        return [word[:-3].replace("'", ""), "not"]
    elided, _, rest = word.partition("'")
    if elided in _ELIDED and rest and rest not in _CLITICS:
        return [_ELIDED[elided], *_word_tokens(rest)]
    head, _, tail = word.rpartition("'")
    if tail in _CLITICS:
        word = head
    return [word.replace("'", "")]


def _bigrams(piece: str) -> list[str]:
    if len(piece) == 1:
        return [piece]
    return [piece[i : i + 2] for i in range(len(piece) - 1)]


def _han_tokens(run: str) -> list[str]:
    out: list[str] = []
    start = 0
    for i, char in enumerate(run):
        if char in CJK_FUNCTION_CHARS:
            if i > start:
                out.extend(_bigrams(run[start:i]))
            out.append(char)
            start = i + 1
    if start < len(run):
        out.extend(_bigrams(run[start:]))
    return out


def tokens(text: str) -> list[str]:
    """Case-folded matching tokens of ``text`` in order, stop words included.

    >>> tokens("I don't like 寿司")
    ['i', 'do', 'not', 'like', '寿司']
    """
    out: list[str] = []
    for match in _TOKEN_RE.finditer(unicodedata.normalize("NFKC", text).casefold()):
        piece = match.group()
        if match.lastgroup == "han":
            out.extend(_han_tokens(piece))
        elif match.lastgroup == "hangul":
            out.extend(_bigrams(piece))
        else:
            out.extend(t for t in _word_tokens(piece) if t)
    return out


def is_stop_word(token: str) -> bool:
    """Filler that carries no fact: function words, greetings, conversational fillers, lone kana."""
    return token in STOP_WORDS or (len(token) == 1 and _HIRAGANA_RE.match(token) is not None)


def content_words(text: str) -> list[str]:
    """:func:`tokens` without stop words, in order, repeats kept (BM25 counts them)."""
    return [t for t in tokens(text) if not is_stop_word(t)]


def is_cjk_token(token: str) -> bool:
    return _CJK_TOKEN_RE.match(token) is not None


def is_negation(token: str) -> bool:
    return token in NEGATION_WORDS or (is_cjk_token(token) and any(c in NEGATION_CHARS for c in token))


# The languages whose lemmas :func:`lemmas` looks up: those the support rules read.
LEMMA_LANGUAGES = ("en", "pl", "de", "fr", "es")


@functools.lru_cache(maxsize=65536)
def lemmas(token: str) -> frozenset[str]:
    """The dictionary forms ``token`` (a :func:`tokens` token) may be of, in any of ``LEMMA_LANGUAGES``,
    itself included: "esse" and "isst" are both "essen", "biorę" and "bierze" "brać", "told" "tell". Read
    by simplemma, a maintained dictionary lemmatiser for dozens of languages (imported on first use: its
    Polish dictionary takes seconds to load, and most texts are matched before it is needed)."""
    if not token.isalpha() or is_cjk_token(token):
        return frozenset({token})
    lemmatize = _lemmatizer().lemmatize
    return frozenset({token, *(lemmatize(token, lang=language).casefold() for language in LEMMA_LANGUAGES)})


def read_lemma_dictionaries() -> None:
    """Read every language's lemma dictionary now. It takes seconds of CPU that hold the interpreter's lock, so
    the bot does it before it serves: read by the first capture instead, it starved the conversation turns of
    those seconds (a reply's recall ran out of time)."""
    lemmatize = _lemmatizer().lemmatize
    for language in LEMMA_LANGUAGES:
        lemmatize("read", lang=language)


@functools.cache
def _lemmatizer() -> Any:
    """simplemma reading its dictionaries in place: its default builds each language's whole dictionary as Python
    objects, 630 MB for these five languages, against about 80 MB read this way; a look-up costs a few
    microseconds more, and :func:`lemmas` caches them. Their index is read from kith's model cache
    (:mod:`memory.core.lemma_dictionaries`), so opening them takes a tenth of the time it takes to build it."""
    from memory.core.lemma_dictionaries import cached_lemmatizer

    return cached_lemmatizer()


def same_lemma(a: str, b: str) -> bool:
    """Whether tokens ``a`` and ``b`` are forms of one word in one of ``LEMMA_LANGUAGES`` (irregular forms
    included, which :func:`words_match` cannot see)."""
    return a == b or not lemmas(a).isdisjoint(lemmas(b))


def _same_inflected_stem(a: str, b: str) -> bool:
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    for stem in range(common, INFLECTION_MIN_STEM_CHARS - 1, -1):
        endings = _SHORT_STEM_SUFFIXES if stem == INFLECTION_MIN_STEM_CHARS else INFLECTION_SUFFIXES
        if a[stem:] in endings and b[stem:] in endings:
            return True
    return False


def words_match(a: str, b: str) -> bool:
    """Whether two tokens count as the same word.

    Seed rule: equal, or the shorter is a prefix of the longer and at least
    ``PREFIX_MATCH_MIN_CHARS`` long (postgres/postgresql, migrate/migrated). Added for
    inflected languages: both are a shared stem of 3+ letters plus a known ending
    (Warszawa/Warszawie, kot/kota/kotem). CJK bigrams and numbers match only exactly.
    """
    if a == b:
        return True
    if is_cjk_token(a) or is_cjk_token(b) or a.isdigit() or b.isdigit():
        return False
    shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
    if len(shorter) >= PREFIX_MATCH_MIN_CHARS and longer.startswith(shorter):
        return True
    return a.isalpha() and b.isalpha() and _same_inflected_stem(a, b)
