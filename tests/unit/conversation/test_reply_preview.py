"""A reply ready while its preview message is still being posted: the post finishes and is noted before the preview
lets go, so the reply's final send finds the message to edit instead of posting a second one beside it."""

from __future__ import annotations

import asyncio

from conversation.reply_preview import ReplyPreview
from delivery.previews import PreviewKey
from delivery.rate_gate import RateGate
from ground.types import ChatKind
from tests.support.messages import inbound


class SlowPlatform:
    """A platform whose message post takes until the test lets it answer (a slow network)."""

    name = "discord"

    def __init__(self) -> None:
        self.posting = asyncio.Event()
        self.answer = asyncio.Event()
        self.posted: list[str] = []

    def previews(self, chat_kind: ChatKind) -> bool:
        return True

    async def post_preview(self, chat_id: str, thread_id: str | None, text: str) -> str:
        self.posting.set()
        await self.answer.wait()
        self.posted.append(text)
        return "c:1"

    async def edit_preview(self, chat_id: str, message_id: str, text: str) -> None:
        raise AssertionError("no edit expected")


class Notes:
    """Where the preview notes its message (delivery.previews.PreviewBook's part), in memory."""

    def __init__(self) -> None:
        self.kept: dict[PreviewKey, str] = {}

    async def noted(self, key: PreviewKey) -> str | None:
        return self.kept.get(key)

    async def note(self, key: PreviewKey, message_id: str) -> None:
        self.kept[key] = message_id


async def test_a_post_under_way_when_the_reply_is_ready_is_finished_and_noted() -> None:
    platform, notes = SlowPlatform(), Notes()
    message = inbound("what's the plan?", platform="discord", chat_id="c")
    preview = ReplyPreview(platform, message, RateGate(), min_gap_s=0.0, give_up_s=5.0, notes=notes,
                           first_delay_s=0.0)
    async with preview:
        preview.grew("Here is the plan")
        await asyncio.wait_for(platform.posting.wait(), 5)
        asyncio.get_running_loop().call_later(0.2, platform.answer.set)  # the platform answers after the reply
    assert platform.posted == ["Here is the plan"]
    assert notes.kept == {PreviewKey("discord", "c", message.message_id): "c:1"}
