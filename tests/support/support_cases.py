"""The shape of a support-rule case and the names its tables use for each refusal: one message of a person's, one
memory an extractor proposed about them with its quote, and how the validator must answer."""

from __future__ import annotations

from dataclasses import dataclass

from memory.capture.validation import RejectReason

NEGATED = RejectReason.EVIDENCE_NEGATED
HYPOTHETICAL = RejectReason.EVIDENCE_HYPOTHETICAL
QUESTION = RejectReason.EVIDENCE_QUESTION
REPORTED = RejectReason.EVIDENCE_REPORTED
PARTIAL = RejectReason.EVIDENCE_PARTIAL
PAST = RejectReason.EVIDENCE_PAST
NOT_GROUNDED = RejectReason.NOT_GROUNDED
KEEP = None


@dataclass(frozen=True)
class Case:
    id: str
    said: str
    text: str
    evidence: str
    refused_as: RejectReason | None  # None: it must be kept
