"""Discord's own payloads (from the fake's builders) as discord.py objects, for tests of the translation to and from
the core's types."""

from __future__ import annotations

from dataclasses import dataclass, field

import discord

from channels.discord.translate import BotIdentity, gateway_intents
from tests.fakes.discord_api import FakeDiscord, JsonDict, dm_channel_payload

ALICE = 200_000_000_000_000_001
BOB = 200_000_000_000_000_002
OTHER_BOT = 200_000_000_000_000_009
GUILD = 300_000_000_000_000_001
GENERAL = 300_000_000_000_000_002
THREAD = 300_000_000_000_000_003
DM = 300_000_000_000_000_010


@dataclass
class Payloads:
    """Discord's own payloads (from the fake's builders) parsed by a real discord.py ConnectionState."""

    fake: FakeDiscord = field(default_factory=FakeDiscord)
    client: discord.Client = field(default_factory=lambda: discord.Client(intents=gateway_intents()))

    def __post_init__(self) -> None:
        fake = self.fake
        fake.add_user(ALICE, "alice", global_name="Alice")
        fake.add_user(BOB, "bob")
        fake.add_user(OTHER_BOT, "otherbot", bot=True)
        fake.add_guild(GUILD, "Family", members=[ALICE, BOB, OTHER_BOT], nicks={ALICE: "Ally"})
        fake.add_text_channel(GUILD, GENERAL, "general")
        fake.add_thread(GUILD, GENERAL, THREAD, "plans")
        fake.channels[DM] = dm_channel_payload(DM, fake.users[ALICE])
        self.me = BotIdentity(fake.bot_id, "kith_test_bot")
        self.state.user = self.bot_user()  # logged in, as after READY
        self.guild = discord.Guild(data=fake._guild_create(fake.guilds[GUILD]), state=self.state)
        self.dm = discord.DMChannel(me=self.bot_user(), state=self.state, data=fake.channels[DM])

    @property
    def state(self) -> discord.state.ConnectionState:
        return self.client._connection

    def bot_user(self) -> discord.ClientUser:
        return discord.ClientUser(state=self.state, data=self.fake.bot_user)

    def channel(self, channel_id: int) -> discord.abc.Messageable:
        if channel_id == DM:
            return self.dm
        found = self.guild.get_channel_or_thread(channel_id)
        assert found is not None
        return found  # type: ignore[return-value]

    def message(self, channel_id: int, author_id: int, content: str, **kwargs: object) -> discord.Message:
        payload = self.fake.message_payload(channel_id, author_id, content, **kwargs)  # type: ignore[arg-type]
        self.fake.messages[int(payload["id"])] = payload
        return discord.Message(state=self.state, channel=self.channel(channel_id), data=payload)  # type: ignore[arg-type]

    def click(self, message: discord.Message, user_id: int, custom_id: str, component_type: int = 2,
              ) -> discord.Interaction:
        payload: JsonDict = {
            "id": str(self.fake.snowflake()), "application_id": str(self.fake.bot_id), "type": 3, "token": "t",
            "version": 1, "data": {"custom_id": custom_id, "component_type": component_type},
            "channel_id": str(message.channel.id), "channel": self.fake.channels[message.channel.id],
            "message": self.fake.messages[message.id], "attachment_size_limit": 1024, "locale": "en-US",
        }
        if message.guild is not None:
            payload["guild_id"] = str(GUILD)
            payload["member"] = {"user": self.fake.users[user_id], "roles": [], "joined_at": None, "deaf": False,
                                 "mute": False, "flags": 0, "permissions": "0"}
        else:
            payload["user"] = self.fake.users[user_id]
        return discord.Interaction(data=payload, state=self.state)  # type: ignore[arg-type]
