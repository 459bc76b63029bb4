"""Credentials pasted into chat never reach memory. Every token comes from tests/support/fake_secrets.py: the
shape of a real one, and fake at a glance."""

from __future__ import annotations

import pytest

from ground.redaction import REDACTED, redact
from tests.support.fake_secrets import DETECT_SECRETS_TOKENS, FAKE_TOKENS


@pytest.mark.parametrize("name", sorted(FAKE_TOKENS))
def test_pasted_tokens_are_redacted_and_the_sentence_survives(name: str) -> None:
    token = FAKE_TOKENS[name]
    text = f"here is the thing you asked for: {token} thanks!"
    redacted = redact(text)
    assert token not in redacted
    assert redacted == f"here is the thing you asked for: {REDACTED} thanks!"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my password is hunter2", "my password is [redacted]"),
        ("password: Tr0ub4dor&3", "password: [redacted]"),
        ("PASSWORD=correct-horse", "PASSWORD=[redacted]"),
        ("the password to my bank is qwerty123", "the password to my bank is [redacted]"),
        ("hasło to kotek123", "hasło to [redacted]"),
        ("my pin is 4321", "my pin is [redacted]"),
        ("DB_PASSWORD=s3cret API_KEY=abc123", "DB_PASSWORD=[redacted] API_KEY=[redacted]"),
        ("my api key is abcdef", "my api key is [redacted]"),
        ("token: abc", "token: [redacted]"),
    ],
)
def test_labelled_passwords_and_keys_lose_their_value(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_long_blob_after_a_key_word_is_redacted() -> None:
    blob = "9f86d081" + "884c7d65" + "9a2feaa0" + "c55ad015"
    assert redact(f"the deploy token for prod is {blob} ok") == f"the deploy token for prod is {REDACTED} ok"


def test_credentials_inside_a_url_are_redacted_and_the_host_kept() -> None:
    url = "postgres://app:" + "pa55" + "word@db.local:5432/kith"
    assert redact(f"connect to {url}") == f"connect to postgres://app:{REDACTED}@db.local:5432/kith"


def test_a_bearer_header_is_redacted() -> None:
    assert redact("Authorization: Bearer " + "abcDEF" * 4) == f"Authorization: Bearer {REDACTED}"


def test_a_private_key_block_is_redacted() -> None:
    block = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nAAAAfake\nBBBBfake\n-----END " + "OPENSSH PRIVATE KEY-----"
    assert redact(f"key:\n{block}\nbye") == f"key:\n{REDACTED}\nbye"


@pytest.mark.parametrize(
    "text",
    [
        "the password is wrong, I reset it",
        "the token is expired",
        "I lost my key yesterday",
        "the key to happiness is patience",
        "secret santa is fun and the secret is out",
        "pin the message please",
        "I like task-based planning and risk-averse plans",
        "Call me at 123456789 tomorrow",
        "My sister lives in Munich",
        "Mój kot ma na imię Filemon",
    ],
)
def test_ordinary_sentences_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redacting_twice_changes_nothing() -> None:
    text = "password: hunter2 and key " + FAKE_TOKENS["openai"] + " and " + FAKE_TOKENS["telegram"]
    once = redact(text)
    assert redact(once) == once
    assert once.count(REDACTED) == 3


# Card, SSN, PESEL, tax id and IBAN numbers below are the published test values of their schemes
# (a Visa test card, the SSA's example range, PESEL's and the Steuer-ID's textbook examples, the
# ECBS sample IBANs), so the repository holds no real person's number.
CARD = "4111 1111 1111 1111"


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (f"my card is {CARD} exp 12/27 cvv 123, keep it", [CARD, "12/27", "123"]),
        ("card 4111-1111-1111-1111 12/27 123", ["4111-1111-1111-1111", "12/27", " 123"]),
        ("karta 4111111111111111 ważna do 01/28 kod CVV 321", ["4111111111111111", "01/28", "321"]),
        ("Karte 4111 1111 1111 1111 gültig bis 03/29, Prüfnummer 456", [CARD, "03/29", "456"]),
        ("pw hunter2", ["hunter2"]),
        ("my pw is hunter2", ["hunter2"]),
        ("login alice / p4ssw0rd", ["alice", "p4ssw0rd"]),
        ("dane logowania: anna/kotek12", ["anna", "kotek12"]),
        ("bank PIN 4821", ["4821"]),
        ("mein PIN ist 1234", ["1234"]),
        ("kod PIN to 9876", ["9876"]),
        ("my SSN is 536-90-4399", ["536-90-4399"]),
        ("social security number 536904399", ["536904399"]),
        ("mój PESEL 44051401359", ["44051401359"]),
        ("meine Steuer-ID 36574261809", ["36574261809"]),
        ("IBAN DE89 3704 0044 0532 0130 00 Thanks", ["DE89 3704 0044 0532 0130 00"]),
        ("mój numer konta PL61109010140000071219812874.", ["PL61109010140000071219812874"]),
        ("Hasło to kotek123", ["kotek123"]),
        ("Mein Passwort ist Sonne123", ["Sonne123"]),
    ],
)
def test_cards_ids_pins_and_logins_lose_their_value(text: str, gone: list[str]) -> None:
    redacted = redact(text)
    assert REDACTED in redacted
    for secret in gone:
        assert secret not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "4111 1111 1111 1112 is not a card",  # Luhn fails
        "order number 1234567890123",
        "ref 000-12-3456 is not an SSN",  # area 000 is never issued
        "44051401358 is not a PESEL",  # wrong check digit
        "DE89 3704 0044 0532 0130 01 fails its checksum",
        "das Passwort ist falsch",
        "the pass to the concert is expensive",
        "I expected 3/4 of people",
        "/pin 12",
        "the meeting is at 10:30 on 12/05",
    ],
)
def test_numbers_that_fail_their_check_are_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "token",
    [FAKE_TOKENS["aws"], FAKE_TOKENS["github"], DETECT_SECRETS_TOKENS["gitlab"], FAKE_TOKENS["slack-bot"],
     DETECT_SECRETS_TOKENS["stripe"], DETECT_SECRETS_TOKENS["sendgrid"]],
)
def test_detect_secrets_key_formats_are_redacted_whole(token: str) -> None:
    redacted = redact(f"use {token}, please")
    assert redacted == f"use {REDACTED}, please"


# A Luhn-valid test card, a valid German tax id and PESEL (python-stdnum's own examples), and a Polish account
# number whose check digits python-stdnum computes: built here so no realistic literal sits in the repository.
CARD = "4111" + "1111" + "1111" + "1111"
TAX_ID = "365" + "742" + "618" + "09"
NRB_BODY = "1090" + "1014" + "0000" + "0712" + "1981" + "2874"


def _nrb() -> str:
    from stdnum import iban

    return iban.calc_check_digits("PL00" + NRB_BODY) + NRB_BODY


def _groups(digits: str, size: int, sep: str) -> str:
    return sep.join(digits[i:i + size] for i in range(0, len(digits), size))


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        # The same card however it is written: dotted, fullwidth, with zero-width spaces or joiners inside.
        (f"card {_groups(CARD, 4, '.')} thanks", [CARD[4:8]]),
        (f"card {CARD.translate(str.maketrans('0123456789', '０１２３４５６７８９'))} ok", ["１１１１"]),
        (f"card {_groups(CARD, 4, chr(0x200B))} ok", [CARD[:4]]),
        (f"card {_groups(CARD, 1, chr(0x2060))} ok", [chr(0x2060)]),
        # Grouped by a middle dot or a typographic apostrophe, in a message that is not ASCII anyway.
        (f"meine Karte: {_groups(CARD, 4, '·')}, danke schön", [CARD[4:8]]),
        (f"mój numer karty to {_groups(CARD, 4, '’')}, dzięki", [CARD[4:8]]),
        # An IBAN in lower case, a Polish account number without its "PL", a tax id in groups.
        ("my iban is de89 3704 0044 0532 0130 00, thanks", ["0532"]),
        (f"numer konta {_groups(_nrb()[:2], 2, '')} {_groups(_nrb()[2:], 4, ' ')} dzięki", [NRB_BODY[-4:]]),
        (f"meine Steuer-ID ist {TAX_ID[:2]} {TAX_ID[2:5]} {TAX_ID[5:8]} {TAX_ID[8:]}", [TAX_ID[5:8]]),
        # HTTP Basic credentials, a passphrase of several words, PINs with words between label and value.
        ("curl -H 'Authorization: Basic " + "YW5uYTpzM2NyZXQ=" + "' https://x", ["YW5uYTpzM2NyZXQ"]),
        ("my wifi password is purple monkey dishwasher", ["purple", "monkey", "dishwasher"]),
        ('the password is "correct horse battery staple", ok?', ["horse", "staple"]),
        ("meine Geheimzahl ist 4711", ["4711"]),
        ("PIN to my phone: 0000", ["0000"]),
        ("la PIN de mi tarjeta: 9876", ["9876"]),
        ("mon mot de passe est soleil42", ["soleil42"]),
        ("mi contraseña es gato123", ["gato123"]),
        ("hasło do wifi: zielony ogórek", ["zielony", "ogórek"]),
    ],
)
def test_secrets_written_to_slip_past_are_redacted_all_the_same(text: str, gone: list[str]) -> None:
    redacted = redact(text)
    assert REDACTED in redacted, redacted
    for piece in gone:
        assert piece not in redacted, redacted


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # What is not a secret stays as typed, invisible characters and all.
        ("basic training starts on Monday", "basic training starts on Monday"),
        ("it weighs 72.5 kg and costs 1.200 zł", "it weighs 72.5 kg and costs 1.200 zł"),
        ("my password is hunter2 for the bank", "my password is [redacted] for the bank"),
        ("my password is hunter2 and I keep forgetting it", "my password is [redacted] and I keep forgetting it"),
        ("the password is too short", "the password is too short"),
        ("call me at 12 345 678 901 tomorrow", "call me at 12 345 678 901 tomorrow"),
        ("zero\u200bwidth words stay", "zero\u200bwidth words stay"),
    ],
)
def test_what_only_looks_like_those_secrets_is_left_as_typed(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_the_words_around_a_secret_keep_their_invisible_characters_and_odd_forms() -> None:
    text = f"ｍｙ card\u200b is {_groups(CARD, 4, '.')}\u200b."
    assert redact(text) == f"ｍｙ card\u200b is {REDACTED}\u200b."
