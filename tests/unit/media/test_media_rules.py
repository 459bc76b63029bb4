"""Which voice note is read and what its limits say (media.rules, pure)."""

from __future__ import annotations

from ground.config import MediaSettings
from ground.types import Attachment, AttachmentKind
from media.rules import choose_voice

ON = MediaSettings(transcription_model="openai/whisper-1", voice_max_bytes=1_000_000, voice_max_seconds=120)


def voice(**kw: object) -> Attachment:
    return Attachment(AttachmentKind.VOICE, "file-1", "voice.ogg", "audio/ogg", **kw)  # type: ignore[arg-type]


def test_no_transcription_model_reads_nothing_so_the_honest_line_stays() -> None:
    assert choose_voice([voice(size=10, duration_s=3)], MediaSettings()) is None


def test_the_first_voice_note_is_read_and_other_files_are_not() -> None:
    photo = Attachment(AttachmentKind.IMAGE, "p", "a.jpg", "image/jpeg", 10)
    first, second = voice(size=10, duration_s=3), Attachment(AttachmentKind.VOICE, "file-2", "b.mp3")
    choice = choose_voice([photo, first, second], ON)
    assert choice is not None and choice.attachment == first and choice.refusal is None
    assert choose_voice([photo], ON) is None


def test_a_note_past_the_length_or_size_the_platform_told_is_refused_with_the_limit_named() -> None:
    too_long = choose_voice([voice(size=10, duration_s=121)], ON)
    assert too_long is not None and too_long.attachment is None
    assert too_long.refusal is not None and "2 minutes" in too_long.refusal
    too_large = choose_voice([voice(size=1_000_001, duration_s=3)], ON)
    assert too_large is not None and too_large.refusal is not None and "1 MB" in too_large.refusal
    # What the platform did not say is checked while it downloads instead.
    unknown = choose_voice([voice()], ON)
    assert unknown is not None and unknown.attachment is not None


def test_an_attachment_survives_the_inbox_as_it_came() -> None:
    from delivery.inbox import from_payload, to_payload
    from ground.types import ChatKind, InboundMessage

    message = InboundMessage("telegram", "1", "42", ChatKind.DM, "42", "Ana", "", "m1", unreadable="voice message",
                             attachments=(voice(size=2048, duration_s=4.5),))
    back = from_payload(to_payload(message))
    assert back.attachments == message.attachments and back.unreadable == "voice message"


def test_words_said_in_a_voice_message_are_labelled_a_transcript_wherever_they_are_shown() -> None:
    import dataclasses

    from memory.core.records import from_metadata, to_metadata
    from memory.core.words import shown_words
    from tests.support.memory import said_memory

    typed = said_memory("m1", "p1", "PERSON has a sister", "my sister Ola", "my sister Ola lives in Gdańsk")
    spoken = dataclasses.replace(typed, sources=tuple(dataclasses.replace(s, medium="voice") for s in typed.sources))
    assert "voice message" not in (shown_words(typed, "Ana", 200) or "")
    shown = shown_words(spoken, "Ana", 200) or ""
    assert "in a voice message (transcribed)" in shown and '"my sister Ola lives in Gdańsk"' in shown
    # The mark is kept with the memory, as every receipt is.
    assert from_metadata(to_metadata(spoken)).sources == spoken.sources


def test_the_images_shown_are_the_messages_own_in_order_within_the_size_and_count() -> None:
    from media.rules import images_to_show

    def image(ref: str, size: int | None) -> Attachment:
        return Attachment(AttachmentKind.IMAGE, ref, f"{ref}.jpg", "image/jpeg", size)

    files = [image("a", 10), voice(size=5), image("huge", 11), image("b", None), image("c", 3), image("d", 1)]
    assert [a.ref for a in images_to_show(files, 10, 3)] == ["a", "b", "c"]
