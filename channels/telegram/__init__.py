"""Telegram: the Bot API channel, its update translation, its aiohttp transport and its HTML rendering.

Import from the modules (``channels.telegram.channel``, ``.settings``...): every command reads this package's
settings, and only the commands that connect may load python-telegram-bot, so the package itself imports nothing.
"""
