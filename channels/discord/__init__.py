"""Discord: the gateway and REST channel, its event translation and its Markdown rendering."""

from channels.discord.channel import DiscordChannel, check_token

__all__ = ["DiscordChannel", "check_token"]
