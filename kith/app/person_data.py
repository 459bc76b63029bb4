"""Every kind of thing kith keeps about a person, gathered from the features that declare them
(:mod:`ground.person_data`), as :mod:`kith.app.schema` gathers their tables.

Linking an account moves each of them (:func:`ground.person_data.move_person`), and the export holds each of
them (:mod:`kith.app.person_export`), in this list's order: the export document's.
"""

from __future__ import annotations

from conversation.linking import LINK_FAILURES_DATA, LINK_REQUESTS_DATA
from delivery.inbox import WAITING_DATA
from delivery.outbox import OUTBOX_DATA
from ground.person_data import PersonData
from heartbeat.consolidation import DAY_SUMMARIES_DATA
from heartbeat.decay import DECAY_DATA
from heartbeat.due import CHECK_INS_DATA
from memory.controls import QUESTIONS_DATA, PauseBook
from memory.documents import DOCUMENTS_DATA
from memory.goals import GOALS_DATA
from memory.service import MemoryService
from people.history import MESSAGES_DATA, SUMMARIES_DATA
from people.moves import LINK_MOVES_DATA
from policy.store import ACCOUNTS_DATA


def gathered(memory: MemoryService, pauses: PauseBook) -> tuple[PersonData, ...]:
    """Every declaration, over the parts that move what they hold themselves: ``memory`` (the memory store,
    saved exports) and ``pauses`` (whose copy of who is paused a link must keep current)."""
    return (
        ACCOUNTS_DATA,
        pauses.person_data(),
        *memory.person_data(),
        QUESTIONS_DATA,
        GOALS_DATA,
        DOCUMENTS_DATA,
        MESSAGES_DATA,
        WAITING_DATA,
        OUTBOX_DATA,
        SUMMARIES_DATA,
        DAY_SUMMARIES_DATA,
        CHECK_INS_DATA,
        DECAY_DATA,
        LINK_REQUESTS_DATA,
        LINK_FAILURES_DATA,
        LINK_MOVES_DATA,
    )
