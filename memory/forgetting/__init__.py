"""Forgetting: remove exactly what matched, everywhere, and keep it from coming back.

* ``tombstones``: the plan, the journal of confirmed forgets, the forgetter and the tombstones it leaves.
* ``scrub``: the forgotten words out of every table and saved export beyond the memory store.
"""

from memory.forgetting.scrub import GOALS, erase_json
from memory.forgetting.tombstones import JournalUnwritable, RecentForgets, describe_places

__all__ = ["GOALS", "JournalUnwritable", "RecentForgets", "describe_places", "erase_json"]
