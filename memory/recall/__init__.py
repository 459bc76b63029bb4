"""Recall: one person's memories that match a query, ranked one way, and what of them a prompt shows.

* ``engine``: the recall engine over the store.
* ``query_vectors``: the query's embedding under a time budget, cached.
* ``use_credit``: the credit a memory a reply drew on earns.
* ``ranking``: the one ranking every list of memories goes through (pure).
* ``when`` and ``when_languages``: the times a query names, as windows (pure).
* ``prompt_part``: the pinned and recalled part of each prompt.
* ``recall_tool``: the persona's read-only ``recall`` tool.
"""

from memory.recall.engine import Gathered, RecallEngine
from memory.recall.prompt_part import RecallMemoryContext
from memory.recall.ranking import SECONDS_PER_DAY, importance_factor, use_factor
from memory.recall.recall_tool import RecallTool
from memory.recall.use_credit import UseRecorder
from memory.recall.when import said_within

__all__ = [
    "SECONDS_PER_DAY",
    "Gathered",
    "RecallEngine",
    "RecallMemoryContext",
    "RecallTool",
    "UseRecorder",
    "importance_factor",
    "said_within",
    "use_factor",
]
