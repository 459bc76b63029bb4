"""A model's worst relation proposals: whatever shape they come in, only relations whose every name and word the
person said are kept; everything else is refused and counted, and never takes the memory down with it."""

from __future__ import annotations

from typing import Any

import pytest

from memory.capture.relation_rules import RelationRefusal, check_relations
from memory.core.graph_records import EntityKind, RelationProposal

QUOTES = ["My sister Ola lives in Gdańsk"]
FAKE_KEY = "sk-FAKE-not-a-real-key-kith-tests"  # shaped as an API key, so the redactor knows it as one


@pytest.mark.parametrize("raw", [
    "Ola sister of PERSON",  # a string, not a list
    {"subject": "Ola"},  # an object, not a list
    [None, 3, "x", [], {}],  # nothing that is a relation
    [{"subject": 1, "relation": "sister of", "object": "PERSON"}],
    [{"subject": "Ola", "relation": None, "object": "PERSON"}],
    [{"subject": "Ola", "relation": "sister of", "object": "PERSON", "subject_kind": "goddess"}],
    [{"subject": "Ola" * 40, "relation": "sister of", "object": "PERSON"}],  # longer than any name
    [{"subject": "Ola", "relation": "   ", "object": "PERSON"}],
    [{"subject": "PERSON", "relation": "lives in", "object": "me"}],  # the person twice
    [{"subject": "Kasia", "relation": "sister of", "object": "PERSON"}],  # a name never said
    [{"subject": "Ola", "relation": "mother of", "object": "PERSON"}],  # a word never said
    [{"subject": "Ola", "relation": "lives in", "object": FAKE_KEY}],  # a secret as a name
])
def test_garbage_is_refused_and_counted_never_kept(raw: Any) -> None:
    checked = check_relations({"relations": raw}, QUOTES, ["Ana"])
    assert checked.relations == [] and sum(checked.refused.values()) >= 1


def test_a_secret_the_person_pasted_is_never_a_name_even_when_the_words_hold_it() -> None:
    quotes = [f"my key {FAKE_KEY} lives in my notes"]
    checked = check_relations({"relations": [{"subject": FAKE_KEY, "relation": "lives in", "object": "notes"}]},
                              quotes, ["Ana"])
    assert checked.relations == [] and checked.refused == {RelationRefusal.SECRET: 1}


def test_only_the_supported_ones_of_a_mixed_answer_stay_and_past_the_limit_none_are_read() -> None:
    raw = [{"subject": "Ola", "relation": "sister of", "object": "PERSON", "subject_kind": "person"},
           {"subject": "Ola", "relation": "brother of", "object": "PERSON"},
           {"subject": "Ola", "relation": "lives in", "object": "Gdańsk", "object_kind": "place"},
           {"subject": "Ola", "relation": "sister of", "object": "PERSON", "subject_kind": "person"},  # again
           *([{"subject": "Ola", "relation": "lives in", "object": "Gdańsk"}] * 10)]
    checked = check_relations({"relations": raw, "aliases": [["my sister", "Ola"], ["Ola"], "x", ["Ola", "Zed"]]},
                              QUOTES, ["Ana"])
    assert checked.relations == [RelationProposal("Ola", EntityKind.PERSON, "sister of", "PERSON", None),
                                 RelationProposal("Ola", None, "lives in", "Gdańsk", EntityKind.PLACE)]
    assert checked.refused[RelationRefusal.RELATION_NOT_SAID] == 1
    assert checked.refused[RelationRefusal.OVER_LIMIT] == len(raw) - 4
    assert checked.aliases == [("my sister", "Ola")]  # "Zed" was never said; the others are no pairs
