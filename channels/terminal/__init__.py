"""The terminal: a conversation on standard input and output."""

from channels.terminal.channel import TerminalChannel

__all__ = ["TerminalChannel"]
