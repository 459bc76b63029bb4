"""Setup's question about voice notes: which transcription model, if any, checked with one real call."""

from __future__ import annotations

import dataclasses
import io
import os
import wave
from typing import TYPE_CHECKING

from ground import loop
from ground.config import LLMSettings, MediaSettings
from kith.setup.checks import environment

if TYPE_CHECKING:
    from kith.setup.wizard import Dialogue


@dataclasses.dataclass(frozen=True)
class Transcriber:
    label: str
    model: str  # litellm's name; "" asks for it
    key_env: str  # "" asks for none
    asks_base: bool = False


TRANSCRIBERS = (
    Transcriber("OpenAI's Whisper (whisper-1)", "openai/whisper-1", "OPENAI_API_KEY"),
    Transcriber("Groq's Whisper (whisper-large-v3)", "groq/whisper-large-v3", "GROQ_API_KEY"),
    Transcriber("an OpenAI-compatible server by its URL (a local Whisper server keeps the audio here)", "", "",
                asks_base=True),
)


def silence_wav(seconds: float = 0.5, rate: int = 16_000) -> bytes:
    """A short silent WAV: what the check sends, so no one's voice goes anywhere to test a key."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * int(seconds * rate))
    return out.getvalue()


async def check_transcription(media: MediaSettings) -> tuple[bool, str]:
    """One real transcription of half a second of silence: (answered, the line to show)."""
    from llm.client import LLMClient, LLMError

    try:
        await LLMClient(LLMSettings(max_retries=0, separate_process=False)).transcribe(
            silence_wav(), "check.wav", model=media.transcription_model, api_base=media.transcription_api_base,
            api_key_env=media.transcription_api_key_env, timeout_s=30, max_retries=0)
    except LLMError as exc:
        return False, f"{media.transcription_model} did not answer ({exc.kind})"
    return True, f"{media.transcription_model} answered"


def ask_voice(d: Dialogue, current: MediaSettings) -> tuple[MediaSettings, dict[str, str]] | None:
    """The transcription model for voice notes and the secret it needs; None: leave voice notes as they are."""
    d.say("\n3. Voice notes (without a transcription model kith says it can only read text)")
    if not d.yes("Transcribe voice notes?", default=current.transcribes()):
        return dataclasses.replace(current, transcription_model="") if current.transcribes() else None
    while True:
        picked = TRANSCRIBERS[d.choose("Which transcription model?", [t.label for t in TRANSCRIBERS], None)]
        base = ""
        if picked.asks_base:
            while not base.startswith(("http://", "https://")):
                base = d.ask("The server's base URL, e.g. http://localhost:8000/v1", current.transcription_api_base)
            name = ""
            while not name:
                name = d.ask("Model name at that server", "whisper-1")
            model = name if name.startswith("openai/") else f"openai/{name}"
        else:
            model = picked.model
        key_env = picked.key_env or ("TRANSCRIPTION_API_KEY" if picked.asks_base else "")
        have = os.environ.get(key_env, "") if key_env else ""
        hint = "Enter keeps the one already set" if have else "Enter for none" if picked.asks_base else ""
        key = d.secret(f"API key ({key_env}; not shown as you type{'; ' + hint if hint else ''})") or have
        media = dataclasses.replace(current, transcription_model=model, transcription_api_base=base,
                                    transcription_api_key_env=key_env if key else "")
        secret = {key_env: key} if key else {}
        d.say(f"Sending {model} half a second of silence ...")
        with environment(secret):
            ok, detail = loop.run(check_transcription(media))
        d.say(f"  {'ok' if ok else 'failed'}: {detail}")
        if ok or not d.yes("Choose again?", default=True):
            return media, secret
