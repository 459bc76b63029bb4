"""Rolling summaries of a thread's older part, advanced with a compare-and-swap cursor."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from conversation.context import clip
from ground.config import Settings
from ground.db import Database
from llm.client import LLMClient, LLMError
from people import history
from persona.instructions import summary_instruction
from persona.labels import summary_request, summary_transcript_line

log = logging.getLogger("kith.summary")


class Summarizer:
    def __init__(self, db: Database, llm: LLMClient, settings: Settings, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.llm = llm
        self.settings = settings
        self.clock = clock

    async def maybe_summarize(self, conversation: str) -> bool:
        """Fold messages that left the recent window into the summary; True if the cursor advanced."""
        hs = self.settings.history
        summary = await self.db.run(history.get_summary, conversation)
        window = await self.db.run(history.recent, conversation, hs.window_messages)
        if not window:
            return False
        oldest_in_window = window[0].id
        pending = await self.db.run(history.between, conversation, summary.through, oldest_in_window - 1,
                                    hs.summary_batch_messages)
        pending = [m for m in pending if not m.silent]
        if len(pending) < hs.summary_trigger_messages:
            return False
        limit = self.settings.budget.summary_chars
        transcript = [summary_transcript_line(m.id, m.role, m.author, clip(m.text, 1000)) for m in pending]
        prompt = [
            {"role": "system", "content": summary_instruction(limit)},
            {"role": "user", "content": summary_request(summary.text, transcript)},
        ]
        try:
            reply = await self.llm.complete(prompt, model=self.settings.llm.summary_model or None,
                                            purpose="summary")
        except LLMError:
            return False  # the next turn tries again; nothing is lost
        new_through = pending[-1].id
        ok = await self.db.run(history.advance_summary, conversation, expected_through=summary.through,
                               new_through=new_through, text=clip(reply.text.strip(), limit), now=self.clock())
        log.info("summary conversation_len=%d folded=%d through=%d stored=%s", len(conversation), len(pending),
                 new_through, ok)
        return ok
