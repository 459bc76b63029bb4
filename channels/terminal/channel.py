"""The terminal channel: a conversation on standard input and output.

Interactive on a terminal; when standard input is not a terminal it reads one message per
line and prints each reply, so it can be scripted (``printf 'hi\n' | bot.py chat``).

``/file <path> [caption]`` sends a file from this machine as a platform's message would carry one
(:mod:`channels.terminal.files`). A terminal cannot show a file, so one a reply carries (an ``/export``) is
written under ``files_dir`` (the data directory's ``exports/``), owner-only and whole or not at all, and the
reply's line says where.

Standard input is read by a daemon thread of the channel's own, never by the loop's default
executor: a read blocks until Enter, and the loop's shutdown waits for every executor thread, so
Ctrl-C would leave kith waiting for a line nobody types. The thread reads the file descriptor
itself rather than ``sys.stdin``, whose buffer lock it would still hold at interpreter exit.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import getpass
import io
import itertools
import os
import re
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from channels.terminal.files import is_file_line, parse_file_line, read_local
from channels.terminal.formatting import styled
from ground.private_files import write_private_atomically
from ground.types import (
    Attachment,
    AttachmentKind,
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

_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# What a file sent with no caption is called in the honest line when kith cannot read it.
_UNREADABLE = {AttachmentKind.VOICE: "voice message", AttachmentKind.IMAGE: "photo", AttachmentKind.DOCUMENT: "file"}


class TerminalChannel:
    name = PLATFORM

    def __init__(self, *, stdin: TextIO | None = None, stdout: TextIO | None = None, user: str | None = None,
                 interactive: bool | None = None, persona_name: str = "kith",
                 files_dir: Path | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.user = user or _local_user()
        self.interactive = self.stdin.isatty() if interactive is None else interactive
        # Styled only for a person at a terminal; a pipe or a file gets the reply's text as written.
        self.styled = self.interactive and bool(getattr(self.stdout, "isatty", lambda: False)())
        self.persona_name = persona_name
        self.files_dir = files_dir
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
        lines: asyncio.Queue[str] = asyncio.Queue()
        threading.Thread(target=_pump, args=(_line_reader(self.stdin), functools.partial(
            loop.call_soon_threadsafe, lines.put_nowait)), name="terminal-stdin", daemon=True).start()
        try:
            while True:
                if self.interactive:
                    self._write("you> ")
                line = await lines.get()
                if not line:
                    break
                text = line.rstrip("\r\n")
                if not text.strip():
                    continue
                attachments: tuple[Attachment, ...] = ()
                unreadable = ""
                if is_file_line(text.strip()):
                    sent = await asyncio.to_thread(parse_file_line, text.strip())
                    if sent.attachment is None:
                        self._write(f"{sent.error}\n")
                        continue
                    attachments, text = (sent.attachment,), sent.caption
                    unreadable = "" if text else _UNREADABLE[sent.attachment.kind]
                message = InboundMessage(
                    platform=PLATFORM, bot_account="kith", chat_id=self.chat_id, chat_kind=ChatKind.DM,
                    sender_id=self.user, sender_name=self.user, text=text,
                    message_id=f"{self._session}-{next(self._ids)}", mentioned=True, timestamp=utcnow(),
                    attachments=attachments, unreadable=unreadable)
                await on_message(message)
        finally:
            self.closed.set()

    async def fetch_attachment(self, attachment: Attachment, max_bytes: int) -> bytes:
        """A file named with ``/file``, read from this machine (:mod:`channels.terminal.files`)."""
        return await asyncio.to_thread(read_local, attachment, max_bytes)

    async def stop(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
        self.closed.set()

    def render(self, message: OutboundMessage) -> list[RenderedChunk]:
        # A terminal has no length limit worth splitting for, and shows Markdown as it is.
        if not message.text.strip() and message.attachment_bytes is None:
            return []
        return [RenderedChunk(message.text, None, message.text)]

    async def send_chunk(self, message: OutboundMessage, chunk: RenderedChunk, index: int, *,
                         plain: bool = False) -> SentMessage:
        prefix = f"{self.persona_name}> " if self.interactive else ""
        line = chunk.plain if plain else chunk.text
        if self.styled and not plain:
            width = shutil.get_terminal_size().columns - len(prefix)
            line = await asyncio.to_thread(styled, line, width)  # rich's first import takes a moment
        if chunk.last and message.attachment_bytes is not None:
            where = await asyncio.to_thread(self._save, message.attachment_name, message.attachment_bytes)
            line = f"{line} {where}" if line.strip() else where
        self._write(f"{prefix}{line}\n")
        if chunk.buttons:
            for i, button in enumerate(message.buttons, 1):
                self._write(f"  [{i}] {button.label}\n")
        return SentMessage(f"console-{next(self._ids)}")

    def _save(self, name: str | None, data: bytes) -> str:
        """Write a reply's file under ``files_dir``, never over an earlier one; what the reply's line adds."""
        shown = file_name(name)
        if self.files_dir is None:
            return f"(the file {shown} cannot be shown in this terminal)"
        path = free_path(self.files_dir.absolute(), shown)
        try:
            write_private_atomically(path, data)
        except OSError as exc:
            return f"(the file {shown} could not be saved: {exc.strerror or type(exc).__name__})"
        return f"(saved to {path}, readable by you only)"

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        return None  # the prompt itself shows that kith is thinking

    def _write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()


def file_name(name: str | None) -> str:
    """A reply's file name as one plain name in a directory: no path, no hidden file, nothing a shell reads."""
    plain = _UNSAFE_IN_NAME.sub("_", Path(name or "").name).lstrip(".")
    return plain or "attachment"


def free_path(directory: Path, name: str) -> Path:
    """``directory/name``, or ``name`` with -2, -3, … before its suffix when that is taken."""
    path = directory / name
    stem, suffix = path.stem, path.suffix
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{stem}-{n}{suffix}"
    return path


def _line_reader(stdin: TextIO) -> Callable[[], str]:
    """A blocking ``readline`` for ``stdin``: on its file descriptor where it has one, '' at its end."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):  # a StringIO in tests
        return stdin.readline
    decoder = codecs.getincrementaldecoder(getattr(stdin, "encoding", None) or "utf-8")(errors="replace")
    pending = ""
    ended = False

    def readline() -> str:
        nonlocal pending, ended
        while "\n" not in pending and not ended:
            try:
                data = os.read(fd, 65536)
            except OSError:  # closed under us: the same as its end
                data = b""
            ended = not data
            pending += decoder.decode(data, final=ended)
        line, newline, pending = pending.partition("\n")
        return line + newline

    return readline


def _pump(readline: Callable[[], str], deliver: Callable[[str], object]) -> None:
    """Hand each line to ``deliver`` (the loop), then '' at the end of input."""
    while True:
        line = readline()
        try:
            deliver(line)
        except RuntimeError:  # the loop is closed: kith is ending and nobody reads any more
            return
        if not line:
            return


def _local_user() -> str:
    try:
        return getpass.getuser() or "me"
    except (KeyError, OSError):
        return "me"
