"""The optional local NLI check: a further refusal on top of the support rules, never a replacement for them.

No NLI model can be fetched here, so the model is stood in for by a function with the same contract (a local model
has no protocol to fake); loading a real one is tested for its one-line errors.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ground.config import MemorySettings
from kith.operator.doctor import check_entailment
from kith.settings import AppSettings
from memory.capture.validation import RejectReason, validate_extraction
from memory.core.records import AuthorRole, Scope, Turn
from memory.encoders.entailment import (
    EntailmentUnavailable,
    as_check,
    entailment_index,
    load_entailment,
    optional_entailment,
    premise_of,
)

ANA = "person-ana"
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TURNS = [Turn(author_role=AuthorRole.USER, person=ANA, text="I moved to Lisbon in May. I keep bees on the roof.",
              platform="telegram", chat_id="c1", message_id="m1", timestamp=T0, scope=Scope.DM)]
ANSWER = json.dumps({"memories": [
    {"kind": "fact", "text": "Moved to Lisbon in May", "evidence": "I moved to Lisbon in May"},
    {"kind": "fact", "text": "Keeps bees on the roof", "evidence": "I keep bees on the roof"},
]})


def _validate(entails=None):
    return validate_extraction(ANSWER, 0, turns=TURNS, person=ANA, known_ids=set(), entails=entails)


def test_without_a_model_the_rules_alone_decide() -> None:
    assert [c.text for c in _validate().accepted] == ["Moved to Lisbon in May", "Keeps bees on the roof"]


def test_a_memory_the_model_does_not_find_entailed_is_refused_and_the_others_kept() -> None:
    asked: list[tuple[tuple[str, ...], str]] = []

    def entails(sentences: Sequence[str], memory: str) -> bool:
        asked.append((tuple(sentences), memory))
        return "bees" not in memory

    report = _validate(entails)
    assert [c.text for c in report.accepted] == ["Moved to Lisbon in May"]
    assert [(r.reason, r.index) for r in report.rejected] == [(RejectReason.NOT_ENTAILED, 1)]
    # The model reads the whole sentence the person said, not the model's quote of it.
    assert asked == [(("I moved to Lisbon in May.",), "Moved to Lisbon in May"),
                     (("I keep bees on the roof.",), "Keeps bees on the roof")]


def test_the_model_is_asked_only_about_what_the_rules_let_through() -> None:
    negated = json.dumps({"memories": [{"kind": "fact", "text": "Lives in Lisbon", "evidence": "Lisbon"}]})
    asked: list[str] = []
    report = validate_extraction(negated, 0, turns=TURNS, person=ANA, known_ids=set(),
                                 entails=lambda s, m: asked.append(m) or True)
    assert not report.accepted and asked == []


class _Model:
    def __init__(self, verdicts: dict[str, bool]) -> None:
        self.verdicts = verdicts
        self.premises: list[str] = []

    def entails(self, premise: str, hypothesis: str) -> bool:
        self.premises.append(premise)
        return self.verdicts[hypothesis]


def test_the_premise_says_who_spoke() -> None:
    model = _Model({"Keeps bees": True})
    assert as_check(model)(["I keep bees on the roof."], "Keeps bees")
    assert model.premises == [premise_of(["I keep bees on the roof."])]
    assert model.premises[0].startswith("The person said: I keep bees")


def test_the_entailment_output_is_found_by_its_label() -> None:
    assert entailment_index({0: "contradiction", 1: "entailment", 2: "neutral"}) == 1
    assert entailment_index({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}) == 0
    with pytest.raises(EntailmentUnavailable, match="name no entailment"):
        entailment_index({0: "positive", 1: "negative"})


def test_a_model_that_is_not_there_is_one_line_and_the_rules_go_on(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(EntailmentUnavailable) as raised:
        load_entailment(str(missing), 0.5)
    assert "\n" not in str(raised.value) and "entailment_model" in str(raised.value)
    caplog.set_level(logging.ERROR)
    assert optional_entailment(str(missing), 0.5) is None
    assert any("entailment check off" in r.getMessage() for r in caplog.records)
    assert optional_entailment("", 0.5) is None


def test_a_directory_that_holds_no_model_is_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EntailmentUnavailable) as raised:
        load_entailment(str(tmp_path), 0.5)
    assert "\n" not in str(raised.value)


def test_without_the_extra_the_error_names_it(tmp_path: Path) -> None:
    if importlib.util.find_spec("sentence_transformers") is not None:
        pytest.skip("sentence-transformers is installed here")
    with pytest.raises(EntailmentUnavailable, match="local-embed extra"):
        load_entailment(str(tmp_path), 0.5)


async def test_doctor_says_whether_the_further_check_is_on(tmp_path: Path) -> None:
    off = await check_entailment(AppSettings())
    assert off.ok and off.detail.startswith("off")
    broken = AppSettings(memory=MemorySettings(entailment_model=str(tmp_path / "missing")))
    result = await check_entailment(broken)
    assert result.warn and "\n" not in result.line() and "support rules alone" in result.detail
