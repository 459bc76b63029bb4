"""Which voice note of a message is read, which images are shown, within which limits, and the honest
lines (pure: no I/O)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ground.config import MediaSettings
from ground.types import Attachment, AttachmentKind


@dataclass(frozen=True, slots=True)
class VoiceChoice:
    """The voice note to transcribe, or the honest line that answers the message instead."""

    attachment: Attachment | None = None
    refusal: str | None = None


def too_long_line(limit_s: float) -> str:
    return (f"That voice message is longer than I can listen to ({_duration(limit_s)} at most). Could you send it "
            "in shorter parts, or type it?")


def too_large_line(limit_bytes: int) -> str:
    return (f"That voice message is larger than I can take ({_megabytes(limit_bytes)} at most). Could you send it "
            "in shorter parts, or type it?")


def unfetched_line() -> str:
    return ("I couldn't get that voice message from the chat (it may have been deleted, or I may not be allowed to "
            "open files). Could you send it again, or type it?")


def unheard_line() -> str:
    return "I couldn't make out any words in that voice message. Could you say it again, or type it?"


def _file_name(name: str) -> str:
    """A file's name as a line names it."""
    return f"“{name}”" if name else "that file"


def document_unsupported_line(name: str) -> str:
    return (f"I can keep text, Markdown and PDF files, but not {_file_name(name)}. Could you send it as "
            "one of those, or paste what matters?")


def document_private_line() -> str:
    return "I keep documents only in a private chat: send it to me directly and I'll keep it for you."


def document_too_large_line(limit_bytes: int) -> str:
    return (f"That document is larger than I can keep ({_megabytes(limit_bytes)} at most). Could you send a "
            "shorter part?")


def document_refused_line(reason: str, limit: int) -> str:
    """The honest line for a document :func:`media.documents.read_document` refused."""
    if reason == "too_many_pages":
        return f"That PDF has more pages than I can keep ({limit} at most). Could you send the part that matters?"
    if reason == "too_long":
        return f"That document is longer than I can keep ({limit:,} characters at most). Could you send a part?"
    if reason == "encrypted":
        return "That PDF is locked with a password, so I can't read it. Could you send an unlocked copy?"
    if reason == "empty":
        return ("I couldn't find any text in that document (a scanned PDF is pictures of pages, which I can't "
                "read). Could you send it as text?")
    return ("I couldn't read that document: the file seems damaged, or isn't what its name says. Could you send it "
            "again?")


def document_unfetched_line() -> str:
    return ("I couldn't get that document from the chat (it may have been deleted, or I may not be allowed to open "
            "files). Could you send it again?")


def document_full_line(most: int) -> str:
    return (f"You keep {most} documents with me already, the most I hold for one person. /docs lists them; "
            "/docs forget N makes room.")


def document_kept_line(name: str, number: int, pages: int, kind: str) -> str:
    size = f", {pages} page{'s' if pages != 1 else ''}" if kind == "pdf" else ""
    return (f"I've kept {_file_name(name)} (#{number}{size}) with your documents, private to you. Ask me "
            "about it any time; /docs lists them.")


def choose_voice(attachments: Sequence[Attachment], settings: MediaSettings) -> VoiceChoice | None:
    """The first voice note or audio file of ``attachments``, checked against the limits the platform lets kith see
    before a download (its size, its length); None when there is none, or no transcription model."""
    if not settings.transcribes():
        return None
    voice = next((a for a in attachments if a.kind is AttachmentKind.VOICE), None)
    if voice is None:
        return None
    if voice.duration_s is not None and voice.duration_s > settings.voice_max_seconds:
        return VoiceChoice(refusal=too_long_line(settings.voice_max_seconds))
    if voice.size is not None and voice.size > settings.voice_max_bytes:
        return VoiceChoice(refusal=too_large_line(settings.voice_max_bytes))
    return VoiceChoice(attachment=voice)


def images_to_show(attachments: Sequence[Attachment], max_bytes: int, most: int) -> list[Attachment]:
    """The message's images a model that sees is shown: in order, at most ``most``, none the platform says is
    larger than ``max_bytes``."""
    return [a for a in attachments if a.kind is AttachmentKind.IMAGE
            and (a.size is None or a.size <= max_bytes)][:most]


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    if minutes >= 1 and minutes == math.floor(minutes):
        return f"{int(minutes)} minute{'s' if minutes != 1 else ''}"
    return f"{int(seconds)} seconds"


def _megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):.0f} MB"
