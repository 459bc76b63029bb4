"""The terminal channel: a conversation on standard input and output.

Interactive on a terminal; when standard input is not a terminal it reads one message per
line and prints each reply, so it can be scripted (``printf 'hi\n' | bot.py chat``).
"""

from __future__ import annotations

import asyncio
import getpass
import itertools
import sys
from typing import TextIO

from core.types import (
    ButtonHandler,
    ChatKind,
    InboundHandler,
    InboundMessage,
    OutboundMessage,
    RenderedChunk,
    SentMessage,
    utcnow,
)

PLATFORM = "console"


class TerminalChannel:
    name = PLATFORM

    def __init__(self, *, stdin: TextIO | None = None, stdout: TextIO | None = None, user: str | None = None,
                 interactive: bool | None = None, persona_name: str = "kith") -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.user = user or _local_user()
        self.interactive = self.stdin.isatty() if interactive is None else interactive
        self.persona_name = persona_name
        self.closed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._session = utcnow().strftime("%Y%m%d%H%M%S%f")

    @property
    def chat_id(self) -> str:
        return self.user

    async def start(self, on_message: InboundHandler, on_button: ButtonHandler | None = None) -> None:
        # The terminal has no buttons: every question it shows also takes a typed answer.
        if self.interactive:
            self._write(f"Talking to {self.persona_name}. Ctrl-D to leave.\n")
        self._reader = asyncio.get_running_loop().create_task(self._read_loop(on_message), name="terminal")

    async def _read_loop(self, on_message: InboundHandler) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if self.interactive:
                    self._write("you> ")
                line = await loop.run_in_executor(None, self.stdin.readline)
                if not line:
                    break
                text = line.rstrip("\r\n")
                if not text.strip():
                    continue
                message = InboundMessage(
                    platform=PLATFORM, bot_account="kith", chat_id=self.chat_id, chat_kind=ChatKind.DM,
                    sender_id=self.user, sender_name=self.user, text=text,
                    message_id=f"{self._session}-{next(self._ids)}", mentioned=True, timestamp=utcnow())
                await on_message(message)
        finally:
            self.closed.set()

    async def stop(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
        self.closed.set()

    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        # A terminal has no length limit worth splitting for, and shows Markdown as it is.
        return [RenderedChunk(message.text, None, message.text)] if message.text.strip() else []

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        prefix = f"{self.persona_name}> " if self.interactive else ""
        self._write(f"{prefix}{chunk.plain if plain else chunk.text}\n")
        for i, button in enumerate(message.buttons, 1):
            self._write(f"  [{i}] {button.label}\n")
        return SentMessage(f"console-{next(self._ids)}")

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        return None  # the prompt itself shows that kith is thinking

    def _write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()


def _local_user() -> str:
    try:
        return getpass.getuser() or "me"
    except (KeyError, OSError):
        return "me"
