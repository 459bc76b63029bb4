"""Forgetting: remove exactly what matched, everywhere, and keep it from coming back.

* ``forgetter``: plans a forget and applies it, across the store and every table, and finishes one a kill
  interrupted.
* ``plan``: what a forget removes, shown before it is confirmed, and what applying it did, counted.
* ``tombstones``: what a forget leaves so that the forgotten fact cannot be captured again.
* ``journal``: a confirmed forget's entry on disk until it is done.
* ``recent_forgets``: the forgets applied lately, which work under way when one landed is held to.
* ``scrub``: the forgotten words out of every table and saved export beyond the memory store.
"""

from memory.forgetting.forgetter import Forgetter, narrowed_note
from memory.forgetting.journal import JOURNAL_DIR, JournalUnwritable
from memory.forgetting.plan import ForgetPlan, ForgetResult, describe_places, query_matches
from memory.forgetting.recent_forgets import RecentForgets
from memory.forgetting.scrub import DOCUMENT_PASSAGES, DOCUMENTS, GOALS, erase_json
from memory.forgetting.tombstones import TombstoneBook

__all__ = [
    "DOCUMENTS",
    "DOCUMENT_PASSAGES",
    "GOALS",
    "JOURNAL_DIR",
    "ForgetPlan",
    "ForgetResult",
    "Forgetter",
    "JournalUnwritable",
    "RecentForgets",
    "TombstoneBook",
    "describe_places",
    "erase_json",
    "narrowed_note",
    "query_matches",
]
