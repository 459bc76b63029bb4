"""Files in the terminal chat: ``/file <path> [caption]`` sends a file from this machine, as a person on a platform
sends one (a voice note or audio file, a photo, a document), and the channel reads it when kith asks.

The person at the terminal is this machine's user: the file is theirs to share, read from its path, never copied
anywhere. A path with spaces goes in quotes. What kind of file it is comes from its name, as a platform's would.
"""

from __future__ import annotations

import mimetypes
import shlex
from dataclasses import dataclass
from pathlib import Path

from ground.types import Attachment, AttachmentError, AttachmentKind

COMMAND = "/file"
USAGE = 'Usage: /file <path> [caption], e.g. /file ~/notes/recipes.md or /file "My Lease.pdf" keep this'
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class FileLine:
    """A ``/file`` line: the file's attachment and the caption typed after it, or why it cannot be sent."""

    attachment: Attachment | None = None
    caption: str = ""
    error: str = ""


def is_file_line(text: str) -> bool:
    return text == COMMAND or text.startswith(COMMAND + " ")


def parse_file_line(text: str) -> FileLine:
    """What ``/file <path> [caption]`` sends (pure but for looking at the path)."""
    rest = text[len(COMMAND):].strip()
    try:
        words = shlex.split(rest)
    except ValueError:
        return FileLine(error=USAGE)
    if not words:
        return FileLine(error=USAGE)
    path = Path(words[0]).expanduser()
    # An unquoted path is the first word: the caption is the rest as typed (its spacing kept).
    caption = " ".join(words[1:]) if rest.startswith(("'", '"')) else rest.partition(" ")[2].strip()
    if not path.is_file():
        return FileLine(error=f"No file at {path}.")
    mime = mimetypes.guess_type(path.name)[0] or ""
    kind = (AttachmentKind.VOICE if mime.startswith("audio/") else AttachmentKind.IMAGE if mime.startswith("image/")
            else AttachmentKind.DOCUMENT)
    size = path.stat().st_size
    return FileLine(Attachment(kind, str(path.absolute()), path.name, mime, size), caption)


def read_local(attachment: Attachment, max_bytes: int) -> bytes:
    """The file's bytes, never more than ``max_bytes`` read (it may have grown since it was named)."""
    try:
        with open(attachment.ref, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError as exc:
        raise AttachmentError("the file is gone", gone=True) from exc
    except PermissionError as exc:
        raise AttachmentError("the file cannot be read", gone=True) from exc
    if len(data) > max_bytes:
        raise AttachmentError("the file is too large", too_large=True)
    return data
