"""A message's attachments read into words: a voice note's transcript becomes the person's turn."""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from ground.config import MediaSettings
from ground.types import AttachmentError, AttachmentSource, InboundMessage
from llm.client import LLMClient
from media.voice_rules import choose_voice, too_large_line, unfetched_line, unheard_line

log = logging.getLogger("kith.media")

VOICE = "voice"  # InboundMessage.medium of a voice note's transcript


@dataclass(frozen=True, slots=True)
class Reading:
    """What became of a message: ``message`` to answer as usual, or ``answer``, one honest line instead."""

    message: InboundMessage
    answer: str | None = None


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
        choice = choose_voice(message.attachments, self.settings)
        if choice is None or not isinstance(source, AttachmentSource):
            return Reading(message)
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
