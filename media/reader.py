"""A message's attachments read into words: a voice note's transcript becomes the person's turn."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ground.config import MediaSettings
from ground.tunables import DOCUMENTS_MAX_PER_PERSON, IMAGES_PER_TURN
from ground.types import (
    Attachment,
    AttachmentError,
    AttachmentKind,
    AttachmentSource,
    ChatKind,
    InboundMessage,
    SeenImage,
)
from llm.client import LLMClient
from media.documents import DocumentRefusal, document_kind, read_document
from media.rules import (
    choose_voice,
    document_full_line,
    document_kept_line,
    document_private_line,
    document_refused_line,
    document_too_large_line,
    document_unfetched_line,
    document_unsupported_line,
    images_to_show,
    too_large_line,
    unfetched_line,
    unheard_line,
)

log = logging.getLogger("kith.media")

VOICE = "voice"  # InboundMessage.medium of a voice note's transcript


PHOTO = "photo"  # InboundMessage.medium of a message that came with photos (its text: the caption, if any)
DOCUMENT = "document"  # InboundMessage.medium of a message whose document kith kept (its text: the caption)


class KeptDocument(Protocol):
    @property
    def number(self) -> int: ...

    @property
    def pages(self) -> int: ...


class DocumentShelf(Protocol):
    """Where a person's documents are kept (:class:`memory.documents.DocumentBook`): ``key`` names the message and
    file, so keeping one twice keeps it once; None when the person keeps as many as they may."""

    async def keep(self, *, key: str, account: str, sender_name: str, name: str, kind: str, pages: Sequence[str],
                   source: tuple[str, str, str]) -> KeptDocument | None: ...


@dataclass(frozen=True, slots=True)
class Reading:
    """What became of a message: ``message`` to answer as usual (with ``images`` shown to the model for this turn
    only), or ``answer``, one honest line instead."""

    message: InboundMessage
    answer: str | None = None
    images: tuple[SeenImage, ...] = ()


class MediaReader:
    """Reads the attachments it can (a voice note, with a transcription model configured) into the message's words.

    A fetch or transcription that fails for a passing reason raises, so the turn is tried again as any failed turn
    is (the message stays in the inbox meanwhile, and after a crash the next start fetches and transcribes it
    again): the turn is never lost to it. What cannot succeed (too long, too large, no words) is answered with one
    honest line.
    """

    def __init__(self, settings: MediaSettings, llm: LLMClient, documents: DocumentShelf | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.documents = documents  # None: no document is kept (the honest line stays)

    async def read(self, message: InboundMessage, source: object) -> Reading:
        if not isinstance(source, AttachmentSource):
            return Reading(message)
        choice = choose_voice(message.attachments, self.settings)
        if choice is None:
            document = next(((i, a) for i, a in enumerate(message.attachments) if a.kind is AttachmentKind.DOCUMENT),
                            None)
            if document is not None and self.documents is not None and self.settings.documents:
                return await self._keep(message, source, *document)
            return await self._look(message, source)
        if choice.refusal is not None:
            log.info("voice message refused platform=%s message=%s reason=limit", message.platform,
                     message.message_id)
            return Reading(message, choice.refusal)
        voice = choice.attachment
        assert voice is not None
        started = time.perf_counter()
        audio = await _fetch(source, voice, message, self.settings.voice_max_bytes,
                             too_large_line(self.settings.voice_max_bytes), unfetched_line())
        if isinstance(audio, Reading):
            return audio
        fetched, size = time.perf_counter(), len(audio)
        media = self.settings
        words = await self.llm.transcribe(audio, voice.name, model=media.transcription_model,
                                          api_base=media.transcription_api_base,
                                          api_key_env=media.transcription_api_key_env,
                                          timeout_s=media.transcription_timeout_s)
        del audio  # held for the one call only
        log.info("voice message transcribed platform=%s message=%s bytes=%d fetch_ms=%.0f transcribe_ms=%.0f "
                 "chars=%d", message.platform, message.message_id, size, (fetched - started) * 1000,
                 (time.perf_counter() - fetched) * 1000, len(words))
        if not words.strip():
            return Reading(message, unheard_line())
        # A caption said with it is the person's words too: it comes first, then what they said.
        text = f"{message.text}\n\n{words}" if message.text else words
        return Reading(dataclasses.replace(message, text=text, unreadable="", medium=VOICE))

    async def _keep(self, message: InboundMessage, source: AttachmentSource, index: int,
                    attachment: Attachment) -> Reading:
        """A document sent in private: read, kept whole for the person, and acknowledged; with a caption, the
        caption is answered (the document's passages are recalled for it like any of their documents)."""
        assert self.documents is not None
        media = self.settings
        kind = document_kind(attachment)
        if kind is None:
            # A file kith cannot keep: a caption is still answered; alone, it hears why.
            return Reading(message) if message.text else Reading(message, document_unsupported_line(attachment.name))
        if message.chat_kind is not ChatKind.DM:
            return Reading(message, document_private_line())
        if attachment.size is not None and attachment.size > media.document_max_bytes:
            return Reading(message, document_too_large_line(media.document_max_bytes))
        started = time.perf_counter()
        data = await _fetch(source, attachment, message, media.document_max_bytes,
                            document_too_large_line(media.document_max_bytes), document_unfetched_line())
        if isinstance(data, Reading):
            return data
        fetched, size = time.perf_counter(), len(data)
        # Reading a long PDF takes seconds of CPU: off the event loop, so every other chat goes on meanwhile.
        text = await asyncio.to_thread(read_document, data, kind, max_pages=media.document_max_pages,
                                       max_chars=media.document_max_chars)
        del data  # the file itself is not kept: its text is
        if isinstance(text, DocumentRefusal):
            log.info("document refused platform=%s message=%s reason=%s", message.platform, message.message_id,
                     text.reason)
            return Reading(message, document_refused_line(text.reason, text.limit))
        read = time.perf_counter()
        kept = await self.documents.keep(
            key=f"{message.platform}:{message.chat_id}:{message.message_id}:{index}", account=message.account,
            sender_name=message.sender_name, name=attachment.name or "document", kind=text.kind, pages=text.pages,
            source=(message.platform, message.chat_id, message.message_id))
        log.info("document read platform=%s message=%s bytes=%d pages=%d chars=%d fetch_ms=%.0f read_ms=%.0f "
                 "keep_ms=%.0f", message.platform, message.message_id, size, len(text.pages), text.chars,
                 (fetched - started) * 1000, (read - fetched) * 1000, (time.perf_counter() - read) * 1000)
        if kept is None:
            return Reading(message, document_full_line(DOCUMENTS_MAX_PER_PERSON))
        if not message.text:
            return Reading(message, document_kept_line(attachment.name, kept.number, kept.pages, text.kind))
        return Reading(dataclasses.replace(message, unreadable="", medium=DOCUMENT))

    async def _look(self, message: InboundMessage, source: AttachmentSource) -> Reading:
        """Photos: shown to a model that sees, with the caption, for this turn only; to one that does not, the
        caption is answered and the photo named as unseen. A photo alone, unseen, keeps the honest line."""
        media = self.settings
        wanted = images_to_show(message.attachments, media.image_max_bytes, IMAGES_PER_TURN)
        if not wanted:
            return Reading(message)
        sees = media.vision if isinstance(media.vision, bool) else await self.llm.sees_images()
        if not sees:
            return Reading(dataclasses.replace(message, medium=PHOTO) if message.text else message)
        images: list[SeenImage] = []
        for attachment in wanted:
            try:
                data = await source.fetch_attachment(attachment, media.image_max_bytes)
            except AttachmentError as exc:
                if not (exc.too_large or exc.gone):
                    raise  # a passing failure: the turn is tried again
                log.info("photo left out platform=%s message=%s too_large=%s", message.platform,
                         message.message_id, exc.too_large)
                continue
            images.append(SeenImage(attachment.mime or "image/jpeg", data))
        if not images:
            return Reading(dataclasses.replace(message, medium=PHOTO) if message.text else message)
        log.info("photos shown platform=%s message=%s count=%d bytes=%d", message.platform, message.message_id,
                 len(images), sum(len(i.data) for i in images))
        return Reading(dataclasses.replace(message, unreadable="", medium=PHOTO), images=tuple(images))


async def _fetch(source: AttachmentSource, attachment: Attachment, message: InboundMessage, max_bytes: int,
                 too_large: str, gone: str) -> bytes | Reading:
    """The file's bytes, or the honest line that answers the message instead: ``too_large`` past ``max_bytes``,
    ``gone`` when the platform no longer serves it. A passing failure raises: the turn is tried again."""
    try:
        return await source.fetch_attachment(attachment, max_bytes)
    except AttachmentError as exc:
        if exc.too_large:
            return Reading(message, too_large)
        if exc.gone:
            log.warning("attachment not fetched kind=%s platform=%s message=%s reason=%s", attachment.kind,
                        message.platform, message.message_id, exc)
            return Reading(message, gone)
        raise
