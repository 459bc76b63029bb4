"""Telegram: the Bot API channel, its update translation, its aiohttp transport and its HTML rendering."""

from channels.telegram.channel import TelegramChannel, check_token

__all__ = ["TelegramChannel", "check_token"]
