"""Scrub credentials and personal numbers people paste into chat before anything reaches disk.

Memories remember people, not their credentials. :func:`redact` replaces the secret part of each
finding with ``[redacted]`` and keeps the words around it, so "my password is ..." still reads as
a sentence. Three kinds of finding:

* **credentials and tokens**, by the plugins of Yelp's ``detect-secrets`` (a maintained catalogue
  of key formats: AWS, GitHub, GitLab, Slack, Stripe, JWT, private keys, URL credentials, ...) and
  a few formats it lacks or matches only as a whole line (OpenAI/Anthropic keys, Telegram bot
  tokens mid-sentence, Google keys, bearer headers);
* **checked personal numbers**, by ``python-stdnum``: a card number only when its Luhn digit holds
  (and then its expiry and CVV beside it), a US SSN, a Polish PESEL or a German tax id only when
  its checksum or structure holds, an IBAN only when its checksum holds;
* **labelled values**: what follows a password, PIN, CVV or login label, in English, Polish and
  German ("pw hunter2", "login anna / s3cret", "bank PIN 4821", "hasło to kotek1", "Passwort ist x").

It is deliberately greedy: a false positive costs a word of a memory, a false negative keeps a live
key or a card on disk. Redacting twice changes nothing. Most messages hold no digit, no long token
and no label word, and those are returned after one regex scan (the per-message path runs this on
every history row it writes).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from stdnum import iban, luhn
from stdnum.de import idnr
from stdnum.pl import pesel
from stdnum.us import ssn

from ground.visible_text import folded_for_matching

REDACTED = "[redacted]"

Span = tuple[int, int]

# The cheap test first: a secret holds a digit, a long unbroken token, or sits after a label word.
_LABEL_WORDS = (
    r"pass|pw|pwd|pin|cvv|cvc|csc|login|logon|user|creds|credential|token|secret|key|klucz|bearer|auth|hasł|hasl|"
    r"kennwort|zugang|benutzer|anmelde|private|iban|api|access|client|ssn|social|prüf|logowani|użytkow|uzytkow|"
    r"geheim|mdp|contrase|clave|basic|authori|nip|code|código|codigo"
)
_MAY_HOLD_SECRET = re.compile(rf"\d|[A-Za-z0-9_\-+/=.]{{16,}}|(?i:(?<![a-z])(?:{_LABEL_WORDS}))")
_HAS_LABEL = re.compile(rf"(?i:(?<![a-z])(?:{_LABEL_WORDS}))")
# Between two digits these only group them ("4111.1111.1111.1111", "1 234", "1’000", "12_345"): the number
# patterns read each as a space, the plain grouping they know. One character for one, so the indices of the
# view the other patterns read still hold.
_DIGIT_GROUP = re.compile(r"(?<=\d)[.·'’_ ](?=\d)")
# Card, SSN, PESEL, tax id and IBAN numbers are nine digits or more; an expiry has a slash.
_MAY_HOLD_NUMBER = re.compile(r"\d[\d \-]{7,}\d|\d\s*/\s*\d")
# Every key format detect-secrets knows is a long unbroken run, a URL's credentials or a PEM block;
# its plugins (some forty patterns) run only on text that has one.
_MAY_HOLD_KEY = re.compile(r"[A-Za-z0-9_\-+/=.:]{16,}|://|BEGIN")

# detect-secrets plugins that do not find credentials in prose: the entropy ones flag any quoted
# word of a chat message only through their filters, which need a file; a public IP is not a secret.
_SKIPPED_PLUGINS = frozenset({"IPPublicDetector"})
# Value-finding plugins (no pattern list of their own): what they report is redacted wherever it occurs.
_VALUE_PLUGINS = frozenset({"KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString"})
_MIN_VALUE_CHARS = 6  # a reported value shorter than this is a word, not a key (and would redact prose)
_MIN_GROUP_CHARS = 8  # a capture group shorter than this is the key's prefix ("ghp"), not the key
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-+/=]")


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[RegexBasedDetector, ...], tuple[BasePlugin, ...]]:
    """detect-secrets' own plugin set with its default settings, built once per process."""
    patterns: list[RegexBasedDetector] = []
    values: list[BasePlugin] = []
    for plugin_class in get_mapping_from_secret_type_to_class().values():
        name = plugin_class.__name__
        if name in _SKIPPED_PLUGINS:
            continue
        plugin = plugin_class()
        if name in _VALUE_PLUGINS:
            values.append(plugin)
        elif isinstance(plugin, RegexBasedDetector):
            patterns.append(plugin)
    return tuple(patterns), tuple(values)


def _whole_token(text: str, start: int, end: int) -> Span:
    """A key format matched inside a token redacts the whole token: what is left of it is still the key.

    A dot inside a token is part of it (a JWT's parts), one that ends a sentence is not.
    """
    def token_at(i: int) -> bool:
        if _TOKEN_CHAR.match(text, i):
            return True
        return text[i] == "." and 0 < i < len(text) - 1 and bool(_TOKEN_CHAR.match(text, i - 1)) \
            and bool(_TOKEN_CHAR.match(text, i + 1))

    while start < end and not _TOKEN_CHAR.match(text, start):
        start += 1
    while end > start and not _TOKEN_CHAR.match(text, end - 1):
        end -= 1
    while start > 0 and token_at(start - 1):
        start -= 1
    while end < len(text) and token_at(end):
        end += 1
    return start, end


def _detect_secrets_spans(text: str) -> Iterator[Span]:
    patterns, values = _plugins()
    for plugin in patterns:
        for regex in plugin.denylist:
            for match in regex.finditer(text):
                groups = [i for i in range(1, (match.re.groups or 0) + 1)
                          if match.group(i) and len(match.group(i)) >= _MIN_GROUP_CHARS]
                if groups:  # "aws_secret = '<key>'": the key, not its label
                    yield match.span(groups[-1])
                else:
                    yield _whole_token(text, *match.span())
    for plugin in values:
        for found in plugin.analyze_line(filename="message.txt", line=text):
            value = found.secret_value
            if value and len(value) >= _MIN_VALUE_CHARS:
                for match in re.finditer(re.escape(value), text):
                    yield match.span()


# Formats detect-secrets lacks, or matches only as a whole line (Telegram), or only with a marker
# newer keys do not carry (OpenAI's "T3BlbkFJ").
_WHOLE_SECRETS = [
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"),  # Anthropic
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),  # OpenAI
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),  # Slack bot/user tokens, mixed case
    re.compile(r"\bxapp-[A-Za-z0-9\-]{10,}"),  # Slack app-level token
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}"),  # Telegram bot token, anywhere in a line
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens of other lengths
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),  # GitHub fine-grained token
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API key
    re.compile(r"\b(?:discord|mfa)\.[A-Za-z0-9_\-]{20,}"),  # old Discord user tokens
]

# "scheme://user:password@host": keep the user and host.
_URL_CREDENTIALS = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:(?P<value>[^\s@/]+)(?=@)", re.I)

# Words after "is"/"to"/"ist" that show the sentence is about the password, not giving it.
_NOT_A_SECRET = (
    r"(?:\[redacted\]|required|wrong|incorrect|correct|expired|invalid|valid|empty|set|changed|missing|"
    r"too|the|a|an|not|still|same|weak|strong|secure|safe|long|short|ok|okay|fine|stored|saved|reset|"
    r"change|forgotten|lost|different|new|old|good|bad|my|your|his|her|our|their|for|of|in|on|at|me|"
    r"nie|mój|moje|moja|takie|taki|zbyt|za|falsch|richtig|neu|alt|abgelaufen|geändert|zu|nicht|sicher|"
    r"das|der|die|ein|eine|mein|meine|dein|deine|le|la|les|un|une|mon|ma|trop|pas|el|los|las|una|mi|muy|no)"
    r"(?=[\s.,;:!?)]|$)"
)
# After ":" or "=" anything is the value; after "is" a plain word may just be prose.
_SEPARATOR = (rf"(?:\s*[:=]\s*|\s+(?:is|was|are|jest|to|brzmi|wynosi|ist|lautet|war|est|es|era)\s+"
              rf"(?:now\s+|teraz\s+|jetzt\s+|maintenant\s+|ahora\s+)?"
              rf"(?!{_NOT_A_SECRET}))")
_PASSWORD_LABEL = (r"(?:password|passphrase|passcode|passwd|pwd|pw|hasło|haslo|hasła|hasla|passwort|kennwort|"
                   r"zugangscode|mot de passe|mdp|contraseña|contrasena|clave de acceso|wifi key|wlan-schlüssel)")
# A passphrase is several plain words ("purple monkey dishwasher"): after the first, lower-case words join the
# value until a word that starts a new clause or a preposition ("hunter2 for the bank" keeps "for the bank").
_CLAUSE_WORDS = (
    r"and|but|or|so|for|to|of|in|on|at|with|from|since|because|if|when|the|a|an|it|is|was|"
    r"und|aber|oder|für|mit|von|seit|weil|wenn|der|die|das|ist|"
    r"i|a|ale|lub|albo|dla|do|na|w|z|od|bo|jest|"
    r"et|mais|ou|pour|avec|de|du|le|la|les|est|y|pero|o|para|con|el|los|las|es"
)
_PASSPHRASE_TAIL = rf"(?:[ \t]+(?!(?:{_CLAUSE_WORDS})\b)[a-zà-öø-ÿąćęłńóśźż]{{2,}}(?![\w@:=/.]\S)){{0,5}}"
_QUOTED = r"\"[^\"\n]{1,80}\"|“[^”\n]{1,80}”|„[^“”\n]{1,80}[“”]|«\s?[^»\n]{1,80}»|'[^'\n]{1,80}'"
_PASSWORD_VALUE = re.compile(
    rf"(?<![A-Za-z0-9/]){_PASSWORD_LABEL}\b(?:\s+[^\s:=]+){{0,4}}?{_SEPARATOR}"
    rf"(?P<value>{_QUOTED}|\S+{_PASSPHRASE_TAIL})", re.I)
# "pass" is a common word: only "pass: x" / "pass=x" gives a value.
_PASS_COLON = re.compile(r"(?<![A-Za-z0-9/])pass\s*[:=]\s*(?P<value>\S+)", re.I)
# No separator at all ("pw hunter2", "password Tr0ub4dor&3"): the value must look made up (a digit
# or a symbol in it), so "the password manager" stays.
_PASSWORD_BARE = re.compile(
    rf"(?<![A-Za-z0-9/]){_PASSWORD_LABEL}\s+(?P<value>(?=\S*[0-9!@#$%^&*_+=?~])(?!\[redacted\])\S{{3,}})", re.I)
# A PIN or a card's security code is digits, a few words after its label at most: "bank PIN 4821",
# "PIN-Code: 1234", "kod PIN to 1234", "CVV 123".
_PIN_LABEL = (r"(?:pin|pin-?code|pin-?nummer|pinu|cvv2?|cvc2?|csc|cid|security code|kod cvv|prüfnummer|"
              r"kartenprüfnummer|geheimzahl|geheimnummer|code pin|code secret|code confidentiel|nip|"
              r"código pin|codigo pin|clave pin|número secreto|numero secreto)")
_PIN_VALUE = re.compile(
    rf"(?<![A-Za-z0-9/]){_PIN_LABEL}\b(?:\s*[:=#\-]?\s*(?:is|to|jest|ist|lautet|est|es|code|kod|number|nummer|"
    r"no)\b){0,2}\s*[:=#\-]?\s*(?P<value>\d{3,8})\b", re.I)
# "PIN to my phone: 0000", "Geheimzahl meiner Karte ist 4711": a few words between the label and its value,
# then a separator.
_PIN_AFTER_WORDS = re.compile(
    rf"(?<![A-Za-z0-9/]){_PIN_LABEL}\b(?:\s+[^\s\d:=]+){{1,4}}?\s*"
    r"(?:[:=]|\s(?:is|to|jest|ist|lautet|est|es|wynosi|brzmi)\b)\s*(?P<value>\d{3,8})\b", re.I)
# A login pair: "login anna / s3cret", "user: anna pass: x" keeps the label, "dane logowania anna:s3cret".
_LOGIN_PAIR = re.compile(
    r"(?<![A-Za-z0-9/])(?:login|logon|log-in|creds|credentials|username|user name|user|benutzername|benutzer|"
    r"zugangsdaten|anmeldedaten|dane logowania|użytkownik|uzytkownik)\b\s*[:=]?\s*"
    r"(?P<value>[^\s/|:]+\s*[/|:]\s*\S+)", re.I)

# Key-like labels take their value right after the separator ("secret santa is fun" stays);
# the bare words "token" and "secret" need ":" or "=" ("the secret is out" stays too).
_KEY_VALUE = re.compile(
    r"(?<![A-Za-z0-9])(?:(?:api[_\- ]?key|secret[_\- ]?key|client[_\- ]?secret|access[_\- ]?(?:key|token)|"
    rf"auth[_\- ]?token){_SEPARATOR}|(?:token|secret)\s*[:=]\s*)(?P<value>\S+)", re.I)
_BEARER = re.compile(r"\bbearer\s+(?P<value>[A-Za-z0-9._~+/\-]{16,}=*)", re.I)
# HTTP Basic: base64 of "user:password"; "basic" is a common word, so only a value that decodes to such a pair.
_BASIC = re.compile(r"\bbasic\s+(?P<value>[A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])", re.I)
# A long random-looking run after a word like token/secret/key, with up to a few words in
# between ("the key for prod is 9f86d081..."): 24+ base64/hex characters including a digit.
_KEYWORD_THEN_BLOB = re.compile(
    r"\b(?:token|secret|key|klucz|schlüssel|apikey|credentials?)\b(?:\W+\w+){0,4}?\W+"
    r"(?P<value>(?=[A-Za-z0-9+/_\-]*\d)[A-Za-z0-9+/_\-]{24,}={0,2})", re.I)

_LABELLED = (_URL_CREDENTIALS, _BEARER, _PASSWORD_VALUE, _PASS_COLON, _PASSWORD_BARE, _PIN_VALUE, _PIN_AFTER_WORDS,
             _LOGIN_PAIR, _KEY_VALUE, _KEYWORD_THEN_BLOB)

# A card number: 13-19 digits, in groups split by single spaces or dashes; only a valid Luhn digit makes it one.
_CARD = re.compile(r"(?<![\d\-])\d(?:[ \-]?\d){12,18}(?![\d\-])")
# What may follow a card in one breath: its expiry and security code, labelled or not.
_CARD_TAIL = re.compile(
    r"(?:[\s,;]*(?:(?:exp(?:iry|ires|iration)?|valid(?: thru| until| to)?|ważna do|wazna do|gültig bis|ablauf\w*|"
    r"cvv2?|cvc2?|csc|kod|code)\.?\s*[:=]?\s*)?(?:\d{1,2}\s*/\s*\d{2,4}|\d{3,4}\b))+", re.I)
_EXPIRY = re.compile(
    r"\b(?:exp(?:iry|ires|iration)?|valid(?: thru| until| to)?|ważna do|wazna do|gültig bis|ablauf\w*)\.?\s*[:=]?\s*"
    r"(?P<value>\d{1,2}\s*/\s*\d{2,4})", re.I)
_SSN = re.compile(r"(?<![\d\-])\d{3}-\d{2}-\d{4}(?![\d\-])")
_SSN_LABELLED = re.compile(
    r"\b(?:ssn|social security(?: number| no\.?)?)\b\D{0,12}?(?P<value>\d{3}[ \-]?\d{2}[ \-]?\d{4})(?!\d)", re.I)
# PESEL, German tax id; written whole or in groups ("12 345 678 903").
_ELEVEN_DIGITS = re.compile(r"(?<![\d\-])\d(?: ?\d){10}(?![\d\-]| \d)")
# A Polish account number (NRB) written without its "PL": 26 digits, usually as 2 + 6 groups of 4.
_NRB = re.compile(r"(?<![\d\-])\d{2}(?: ?\d{4}){6}(?![\d\-]| \d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){10,30}\b")


def _pii_spans(text: str) -> Iterator[Span]:
    for match in _CARD.finditer(text):
        end = _card_end(match)
        if end is not None:
            tail = _CARD_TAIL.match(text, end)
            yield match.start(), tail.end() if tail else end
    yield from (m.span("value") for m in _EXPIRY.finditer(text))
    for match in _SSN.finditer(text):
        if ssn.is_valid(match.group()):
            yield match.span()
    for match in _SSN_LABELLED.finditer(text):
        yield match.span("value")  # labelled: whatever its digits, it is meant as one
    for match in _ELEVEN_DIGITS.finditer(text):
        digits = match.group().replace(" ", "")
        if pesel.is_valid(digits) or idnr.is_valid(digits):
            yield match.span()
    for match in _NRB.finditer(text):
        if iban.is_valid("PL" + match.group().replace(" ", "")):
            yield match.span()
    # An IBAN's letters in either case: the checksum, not the spelling, says it is one.
    upper = "".join(c.upper() if len(c.upper()) == 1 else c for c in text)
    for match in _IBAN.finditer(upper):
        yield from _iban_span(upper, match)


def _card_end(match: re.Match[str]) -> int | None:
    """Where the card number a digit run starts with ends: a run may go on into its expiry or code."""
    run = match.group()
    for end in range(len(run), 12, -1):
        if end < len(run) and not run[end].isspace() and run[end] != "-":
            continue  # only whole groups
        digits = re.sub(r"\D", "", run[:end])
        if 13 <= len(digits) <= 19 and luhn.is_valid(digits):
            return match.start() + end
    return None


def _iban_span(text: str, match: re.Match[str]) -> Iterator[Span]:
    """The longest valid IBAN the run starts with: a capitalised word may follow it in the same run."""
    run = match.group()
    for end in range(len(run), 14, -1):
        if (end == len(run) or not run[end].isalnum() or not run[end - 1].isalnum()) and iban.is_valid(run[:end]):
            yield match.start(), match.start() + end
            return


def _key_spans(text: str) -> Iterator[Span]:
    yield from _detect_secrets_spans(text)
    for pattern in _WHOLE_SECRETS:
        yield from (m.span() for m in pattern.finditer(text))


def _labelled_spans(text: str) -> Iterator[Span]:
    for pattern in _LABELLED:
        yield from (m.span("value") for m in pattern.finditer(text))
    for match in _BASIC.finditer(text):
        if _is_basic_credential(match.group("value")):
            yield match.span("value")


def _is_basic_credential(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password) and decoded.isprintable()


def _merge(spans: Iterable[Span], keep: list[Span]) -> list[Span]:
    """Overlapping spans as one, without those inside a ``[redacted]`` already there (so twice is once)."""
    merged: list[Span] = []
    for start, end in sorted(spans):
        if end <= start or any(ks <= start and end <= ke for ks, ke in keep):
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def secret_spans(text: str) -> list[Span]:
    """Where ``text`` holds a secret: sorted, disjoint (start, end) pairs of ``text`` as typed.

    The patterns read the text as a reader sees it (:func:`ground.visible_text.folded_for_matching`): a card
    number typed with zero-width spaces between its digits, in fullwidth digits or in dotted groups is the same
    card, and an IBAN in lower case the same IBAN. What they find is mapped back to the typed text."""
    if not text:
        return []
    view = folded_for_matching(text)
    seen = view.text
    if not _MAY_HOLD_SECRET.search(seen):
        return []
    done = [m.span() for m in re.finditer(re.escape(REDACTED), seen)]
    keys = _key_spans(seen) if _MAY_HOLD_KEY.search(seen) else ()
    grouped = _DIGIT_GROUP.sub(" ", seen)
    numbers = _pii_spans(grouped) if _MAY_HOLD_NUMBER.search(grouped) else ()
    labelled = _labelled_spans(seen) if _HAS_LABEL.search(seen) else ()
    return [view.source_span(start, end) for start, end in _merge((*keys, *numbers, *labelled), done)]


def redact(text: str) -> str:
    """``text`` with credentials, tokens, passwords, PINs and checked personal numbers replaced by ``[redacted]``."""
    spans = secret_spans(text)
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts.append(text[last:start])
        parts.append(REDACTED)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def redact_optional(text: str | None) -> str | None:
    return None if text is None else redact(text)
