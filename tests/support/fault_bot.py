"""``bot.py`` as the fault suite starts it: the same ``main``, with discord.py pointed at a loopback fake.

    python -m tests.support.fault_bot --config kith.toml run

kith has no setting for Discord's URLs (Discord has one address), so a test that runs the real process
against the fake Discord sets ``KITH_TEST_DISCORD_API`` (the REST base, ``http://127.0.0.1:…/api/v10``)
and ``KITH_TEST_DISCORD_GATEWAY`` (``ws://127.0.0.1:…/gateway``); without them nothing is changed. It is
the process itself, not a wrapper around it: its pid is the bot's, its child the model process.
"""

from __future__ import annotations

import os
import sys

import discord.gateway
import discord.http
import yarl

import bot

API_ENV = "KITH_TEST_DISCORD_API"
GATEWAY_ENV = "KITH_TEST_DISCORD_GATEWAY"


def main() -> int:
    if api := os.environ.get(API_ENV):
        discord.http.Route.BASE = api
    if gateway := os.environ.get(GATEWAY_ENV):
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)
    return bot.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
