"""Scrub credentials people paste into chat before anything reaches the memory store.

Memories remember people, not their credentials. :func:`redact` replaces the secret part
of each match with ``[redacted]`` and keeps the words around it, so "my password is ..."
still reads as a sentence. It is deliberately greedy: a false positive costs a word of a
memory, a false negative keeps a live key on disk. Redacting twice changes nothing.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"

# Patterns whose whole match is the secret. Order matters only for readability: each
# pattern runs on the output of the previous one.
_WHOLE_SECRETS = [
    re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
    re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"),  # Anthropic
    re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),  # OpenAI
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),  # Slack bot/user/app tokens
    re.compile(r"\bxapp-[A-Za-z0-9\-]{10,}"),  # Slack app-level token
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_\-]{30,}"),  # Telegram bot token
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),  # GitHub fine-grained token
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API key
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]*)?"),  # JWT
    re.compile(r"\b(?:discord|mfa)\.[A-Za-z0-9_\-]{20,}"),  # old Discord user tokens
]

# "scheme://user:password@host": keep the user and host.
_URL_CREDENTIALS = re.compile(r"(?P<keep>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)[^\s@/]+(?=@)", re.I)

# A label, a separator, then the value: "password: x", "PASSWORD=x", "my password is x",
# "hasło to x"; a password label may have a few words before its separator ("the password
# to my bank is x"). The value is one whitespace-free run, unless it is a word that plainly
# is not a secret ("the password is wrong").
_NOT_A_SECRET = (
    r"(?:\[redacted\]|required|wrong|incorrect|correct|expired|invalid|valid|empty|set|changed|missing|"
    r"too|the|a|an|not|still|same|weak|strong|secure|safe|long|short|ok|okay|fine|stored|saved|reset|"
    r"change|forgotten|lost|different|new|old|good|bad|my|your|his|her|our|their|for|of|in|on|at|me|"
    r"nie|mój|moje|moja|takie|taki)(?=[\s.,;:!?)]|$)"
)
# After ":" or "=" anything is the value; after "is" a plain word may just be prose.
_SEPARATOR = rf"(?:\s*[:=]\s*|\s+(?:is|was|are|jest|to)\s+(?:now\s+)?(?!{_NOT_A_SECRET}))"
_PASSWORD_VALUE = re.compile(
    r"(?P<keep>(?<![A-Za-z0-9])(?:password|passphrase|passcode|passwd|pwd|pin|hasło|haslo)\b"
    rf"(?:\s+[^\s:=]+){{0,4}}?{_SEPARATOR})"
    r"(?P<value>\S+)",
    re.I,
)
# Key-like labels take their value right after the separator ("secret santa is fun" stays);
# the bare words "token" and "secret" need ":" or "=" ("the secret is out" stays too).
_KEY_VALUE = re.compile(
    r"(?P<keep>(?<![A-Za-z0-9])(?:(?:api[_\- ]?key|secret[_\- ]?key|client[_\- ]?secret|access[_\- ]?(?:key|token)|"
    rf"auth[_\- ]?token){_SEPARATOR}|(?:token|secret)\s*[:=]\s*))"
    r"(?P<value>\S+)",
    re.I,
)
_BEARER = re.compile(r"(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/\-]{16,}=*", re.I)

# A long random-looking run after a word like token/secret/key, with up to a few words in
# between ("the key for prod is 9f86d081..."): 24+ base64/hex characters including a digit.
_KEYWORD_THEN_BLOB = re.compile(
    r"(?P<keep>\b(?:token|secret|key|klucz|apikey|credentials?)\b(?:\W+\w+){0,4}?\W+)"
    r"(?P<value>(?=[A-Za-z0-9+/_\-]*\d)[A-Za-z0-9+/_\-]{24,}={0,2})",
    re.I,
)


def _keep_label(match: re.Match[str]) -> str:
    return match.group("keep") + REDACTED


def redact(text: str) -> str:
    """``text`` with API keys, tokens and passwords replaced by ``[redacted]``."""
    for pattern in _WHOLE_SECRETS:
        text = pattern.sub(REDACTED, text)
    for pattern in (_URL_CREDENTIALS, _BEARER, _PASSWORD_VALUE, _KEY_VALUE, _KEYWORD_THEN_BLOB):
        text = pattern.sub(_keep_label, text)
    return text
