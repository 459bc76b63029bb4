"""From a person's words to memories: the extractor's answer checked, staged, then curated by the gate.

* ``job``: the after-reply capture job and its cursors.
* ``validation``: the receipts rule over an extractor's answer; ``support_rules`` (does the sentence say it) and
  ``refusals`` (orders and authority never become memories) are its rules.
* ``merge_gate``: a new fact against what is stored: merge, conflict, or new.
"""

from memory.capture.job import (
    CAPTURE_MAX_TOKENS,
    names_of,
    note_id,
    render_request,
    shown_chunk,
    shown_for,
    turn_of,
    validation_limits,
)
from memory.capture.merge_gate import Outcome, new_memory_id
from memory.capture.validation import validate_off_the_loop

__all__ = [
    "CAPTURE_MAX_TOKENS",
    "Outcome",
    "names_of",
    "new_memory_id",
    "note_id",
    "render_request",
    "shown_chunk",
    "shown_for",
    "turn_of",
    "validate_off_the_loop",
    "validation_limits",
]
