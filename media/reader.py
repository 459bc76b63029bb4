"""A message's attachments read into words: a voice note's transcript becomes the person's turn."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from ground.config import MediaSettings
from ground.tunables import IMAGES_PER_TURN
from ground.types import AttachmentError, AttachmentSource, InboundMessage, SeenImage
from llm.client import LLMClient
from media.rules import choose_voice, images_to_show, too_large_line, unfetched_line, unheard_line

log = logging.getLogger("kith.media")

VOICE = "voice"  # InboundMessage.medium of a voice note's transcript


PHOTO = "photo"  # InboundMessage.medium of a message that came with photos (its text: the caption, if any)


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

    def __init__(self, settings: MediaSettings, llm: LLMClient) -> None:
        self.settings = settings
        self.llm = llm

    async def read(self, message: InboundMessage, source: object) -> Reading:
        if not isinstance(source, AttachmentSource):
            return Reading(message)
        choice = choose_voice(message.attachments, self.settings)
        if choice is None:
            return await self._look(message, source)
        if choice.refusal is not None:
            log.info("voice message refused platform=%s message=%s reason=limit", message.platform,
                     message.message_id)
            return Reading(message, choice.refusal)
        voice = choice.attachment
        assert voice is not None
        started = time.perf_counter()
        try:
            audio = await source.fetch_attachment(voice, self.settings.voice_max_bytes)
        except AttachmentError as exc:
            if exc.too_large:
                return Reading(message, too_large_line(self.settings.voice_max_bytes))
            if exc.gone:
                log.warning("voice message not fetched platform=%s message=%s reason=%s", message.platform,
                            message.message_id, exc)
                return Reading(message, unfetched_line())
            raise
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
