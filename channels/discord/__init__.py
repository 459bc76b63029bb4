"""Discord: the gateway and REST channel, its event translation and its Markdown rendering.

Import from the modules (``channels.discord.channel``, ``.settings``...): every command reads this package's
settings, and only the commands that connect may load discord.py, so the package itself imports nothing.
"""
