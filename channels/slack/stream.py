"""Slack's native stream as a reply's preview (pure): how a streamed message is named, and what to append.

A reply in a thread is previewed with ``chat.startStream`` / ``chat.appendStream``: Slack renders the Markdown
itself and the reader sees the words arrive, where a posted message edited with ``chat.update`` jumps a whole
update at a time. A stream only grows: each append adds to what was streamed, it never rewrites it. So the stream
is sent the model's Markdown settled (:func:`channels.markdown.partial.settled`, and no code block until its closing
fence came), and an append is only what the reply so far adds to what was streamed; a reply that no longer begins
with that cannot be streamed any further and its message is edited whole instead.

The preview message's id says it is a stream (``channel:ts:stream``), because the final send may come from a new
process (after a crash) that knows nothing of it but that id, kept in the database: a stream must be stopped
before ``chat.update`` may touch its message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from channels.markdown.partial import settled

STREAM_MARK = "stream"
# chat.startStream and chat.appendStream take at most 12,000 characters of markdown_text a call.
STREAM_TEXT_MAX_CHARS = 12_000
NOT_STREAMING = "message_not_in_streaming_state"  # Slack ended the stream (stopped, or timed out on its side)
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class MessageRef:
    """A message of ours in Slack: its conversation, its ts, and whether it was opened by chat.startStream."""

    channel: str
    ts: str
    stream: bool = False

    @property
    def id(self) -> str:
        """The id the core keeps: ``channel:ts``, with ``:stream`` for a streamed message."""
        plain = self.plain_id
        return f"{plain}:{STREAM_MARK}" if self.stream else plain

    @property
    def plain_id(self) -> str:
        return f"{self.channel}:{self.ts}"


def parse_message_id(message_id: str) -> MessageRef | None:
    """The message an id names (either shape), or None for one that names no message."""
    parts = message_id.split(":")
    if len(parts) == 3 and parts[2] == STREAM_MARK:
        channel, ts, stream = parts[0], parts[1], True
    elif len(parts) == 2:
        channel, ts, stream = parts[0], parts[1], False
    else:
        return None
    if not channel or not ts:
        return None
    return MessageRef(channel, ts, stream)


def stream_markdown(reply: str, limit: int) -> str:
    """What of the reply so far a stream shows: settled Markdown of its first ``limit`` characters (the first
    message's worth: the final send edits only the first chunk into that message), without an open code block.

    ``settled`` leaves an open code block for a converter to close; a stream cannot take back a closing fence it
    was sent, so the block waits until its own closing fence arrives.
    """
    shown = settled(reply[:limit])
    fences = list(_FENCE.finditer(shown))
    if len(fences) % 2:
        shown = shown[:fences[-1].start()]
    return shown


def next_piece(streamed: str, reply: str, limit: int) -> str | None:
    """The Markdown to append so the stream shows the reply so far: ``""`` when there is nothing new to show yet,
    None when the reply no longer begins with what was streamed (the stream cannot follow it)."""
    shown = stream_markdown(reply, limit)
    if shown.startswith(streamed):
        return shown[len(streamed):]
    if reply.startswith(streamed):
        # Settling cut back further than before (an opening not closed yet): the streamed text still holds.
        return ""
    return None
