"""Text cleaned before it is parsed: line ends normalized, control characters and broken surrogates gone."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def sanitize(text: str) -> str:
    """Normalize line ends, drop control characters and mend surrogates no platform accepts.

    Surrogate halves that form a pair become the one character they encode; a lone half becomes U+FFFD.
    Control characters (NUL, ESC...) are invisible at best and a terminal escape at worst.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text

