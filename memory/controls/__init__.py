"""What a person may do with their own memory, and the conflict questions kith asks them.

* ``person_controls``: list (staged notes too), why, remember, correct a label, pin, forget, export and pause, only
  ever on the requester's own memory; and what a person's own words find (``said_matching``, for ``/why`` and the
  operator's search).
* ``authorisation``: who asks (:class:`Requester`), and the refusal of anything not their own.
* ``pauses``: whose capture is paused.
* ``questions``: which conflicting pair to ask about, the caps, and the questions' state.
"""

from memory.controls.authorisation import RefusalReason, Refused, Requester
from memory.controls.pauses import PauseBook
from memory.controls.person_controls import (
    Listed,
    MemoryControls,
    Resolution,
    notes_in_use,
    relabel_memory,
    said_matching,
)
from memory.controls.questions import (
    QUESTIONS_DATA,
    Answer,
    ConflictPair,
    DmTarget,
    Question,
    QuestionBook,
    askable_pairs,
    caps_allow,
    parse_answer,
    pick_pair,
)

__all__ = [
    "QUESTIONS_DATA",
    "Answer",
    "ConflictPair",
    "DmTarget",
    "Listed",
    "MemoryControls",
    "PauseBook",
    "Question",
    "QuestionBook",
    "RefusalReason",
    "Refused",
    "Requester",
    "Resolution",
    "askable_pairs",
    "caps_allow",
    "notes_in_use",
    "parse_answer",
    "pick_pair",
    "relabel_memory",
    "said_matching",
]
