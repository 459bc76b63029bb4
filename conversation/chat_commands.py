"""Chat commands answered without the model (``/start``, ``/help``); later issues add more."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from ground.types import ButtonPress, InboundMessage, OutboundMessage, reply_to

Command = Callable[[InboundMessage, str], Awaitable[OutboundMessage | None]]
ButtonAction = Callable[[ButtonPress, str], Awaitable[OutboundMessage | None]]

HELP_GREETING = "Hi, I'm {name}. Just talk to me: I remember what you tell me, with your own words as the receipt."
UNKNOWN_COMMAND = "I don't know the command /{name}. /help lists the ones I do."
# What a platform would take for a command: a slash, then a name (Telegram allows 32 characters), optionally
# "@bot". "/usr/bin is full" or "/ˉ\\_(ツ)_/ˉ" is talk, not a command, and goes to the conversation.
COMMAND_NAME = re.compile(r"/([A-Za-z][A-Za-z0-9_]{0,31})(?:@\w+)?")


class ChatCommands:
    """A registry of ``/name`` handlers. An unknown command is answered as unknown, with a pointer to /help:
    sent to the model as chat, it would be answered as if it meant something."""

    def __init__(self, persona_name: str) -> None:
        self.persona_name = persona_name
        self._commands: dict[str, tuple[str, Command]] = {}
        self._buttons: dict[str, ButtonAction] = {}
        self.register("start", "say hello", self._help)
        self.register("help", "what I can do", self._help)

    def register(self, name: str, description: str, handler: Command) -> None:
        self._commands[name] = (description, handler)

    def register_button(self, prefix: str, handler: ButtonAction) -> None:
        """Button payloads look like ``<prefix>:<rest>``; the handler gets the press and ``rest``."""
        self._buttons[prefix] = handler

    async def press(self, press: ButtonPress) -> OutboundMessage | None:
        prefix, _, rest = press.data.partition(":")
        handler = self._buttons.get(prefix)
        return None if handler is None else await handler(press, rest)

    def menu(self) -> list[tuple[str, str]]:
        """(command, description) pairs, for platforms that show a command menu."""
        return [(name, desc) for name, (desc, _handler) in self._commands.items()]

    async def __call__(self, message: InboundMessage) -> OutboundMessage | None:
        head, _, rest = message.text.strip().partition(" ")
        looks_like_command = COMMAND_NAME.fullmatch(head)
        if looks_like_command is None:
            return None
        name = looks_like_command.group(1).lower()
        entry = self._commands.get(name)
        if entry is None:
            return reply_to(message, UNKNOWN_COMMAND.format(name=name))
        return await entry[1](message, rest.strip())

    def help_text(self) -> str:
        """The greeting and every command registered, so the list never lags behind what kith answers."""
        lines = [f"/{name}: {description}" for name, description in self.menu()]
        return "\n".join([HELP_GREETING.format(name=self.persona_name), "Commands:", *lines])

    async def _help(self, message: InboundMessage, _args: str) -> OutboundMessage:
        return reply_to(message, self.help_text())
