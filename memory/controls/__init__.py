"""What a person may do with their own memory, and the conflict questions kith asks them.

* ``person_controls``: list, why, remember, pin, forget, export and pause, only ever on the requester's own memory.
* ``authorisation``: who asks (:class:`Requester`), and the refusal of anything not their own.
* ``pauses``: whose capture is paused.
* ``questions``: which conflicting pair to ask about, the caps, and the questions' state.
"""

from memory.controls.authorisation import RefusalReason, Refused, Requester
from memory.controls.pauses import PauseBook, pause_of
from memory.controls.person_controls import MemoryControls, Resolution
from memory.controls.questions import (
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
from memory.controls.questions import export_of as export_questions

__all__ = [
    "Answer",
    "ConflictPair",
    "DmTarget",
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
    "export_questions",
    "parse_answer",
    "pause_of",
    "pick_pair",
]
