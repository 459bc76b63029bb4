"""The graph's pure rules: names compared however they are typed, aliases joined only when one being fits,
contradictions only between one subject's same relation to different things, and a message's names reaching their
neighbourhood without passing through the person."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.core.graph_records import SELF, EntityKind, RelationProposal
from memory.core.records import Scope, Source
from memory.graph import PersonGraph, Proposed, extends, name_key, relation_key, role_key
from memory.graph.who import who

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def said(subject: str, relation: str, obj: str, message: str, *, subject_kind: EntityKind | None = None,
         object_kind: EntityKind | None = None, scope: Scope = Scope.DM) -> Proposed:
    words = f"{subject} {relation} {obj}"
    return Proposed(RelationProposal(subject, subject_kind, relation, obj, object_kind), (words,), (words,),
                    (Source("telegram", "c", message, NOW),), scope, NOW, note_id=f"n-{message}")


def test_a_name_is_one_key_however_it_is_typed() -> None:
    assert name_key("Ola") == name_key("OLA") == name_key(" ola, ") == name_key("Ola's") == name_key("Оla")
    assert name_key("Ola K.") == "ola k" and name_key("Ola") != name_key("Olaf")
    assert extends("Ola", "Ola K.") and extends("Jan", "Jan B. K.")
    assert not extends("Ola", "Ola Kowalska") and not extends("Ola K.", "Ola")  # a surname is not an initial


def test_relation_words_meet_on_their_dictionary_form_and_roles_are_read() -> None:
    assert relation_key("lives in") == relation_key("lived in") == relation_key("live in")
    assert relation_key("sister of") == relation_key("sisters of") == "sister"
    assert role_key("my sister") == "sister" and role_key("meine Schwester") == relation_key("Schwester")
    assert role_key("Ola") is None and role_key("the sister") is None


def test_an_ambiguous_short_name_joins_nobody() -> None:
    graph = PersonGraph("p")
    graph.grow([said("Ola K.", "sister of", "PERSON", "1"), said("Ola M.", "works with", "PERSON", "2")], NOW)
    growth = graph.grow([said("Ola", "lives in", "Gdańsk", "3")], NOW)
    assert growth.merges == []
    assert graph.resolve("Ola") == graph.root(graph.by_key["ola"])  # its own being, not either of theirs


def test_a_role_said_before_the_relation_that_names_it_is_joined_later() -> None:
    graph = PersonGraph("p")
    graph.grow([said("my sister", "lives in", "Gdańsk", "1")], NOW)
    growth = graph.grow([said("Ola", "sister of", "PERSON", "2")], NOW)
    assert len(growth.merges) == 1
    assert graph.root(graph.by_key["my sister"]) == graph.root(graph.by_key["ola"])


def test_kinds_that_differ_are_never_joined() -> None:
    graph = PersonGraph("p")
    graph.grow([said("Jordan", "lives in", "PERSON", "1", subject_kind=EntityKind.PERSON)], NOW)
    graph.grow([said("PERSON", "visited", "Jordan K", "2", object_kind=EntityKind.PLACE)], NOW)
    assert graph.root(graph.by_key["jordan k"]) != graph.root(graph.by_key["jordan"])


def test_only_one_subjects_same_relation_to_different_things_contradicts() -> None:
    graph = PersonGraph("p")
    graph.grow([said("PERSON", "lives in", "Gdańsk", "1", object_kind=EntityKind.PLACE),
                said("Ola", "sister of", "PERSON", "2"), said("PERSON", "works at", "Acme", "3")], NOW)
    sopot = graph.grow([said("PERSON", "lived in", "Sopot", "4", object_kind=EntityKind.PLACE)], NOW).relations[0]
    assert [graph.name(r.object) for r in graph.contradictions(sopot)] == ["Gdańsk"]
    kasia = graph.grow([said("Kasia", "sister of", "PERSON", "5")], NOW).relations[0]
    assert graph.contradictions(kasia) == []  # a second sister: a different subject
    hobby = graph.grow([said("PERSON", "paints", "landscapes", "6")], NOW).relations[0]
    assert graph.contradictions(hobby) == []  # a new relation type beside the job
    again = graph.grow([said("PERSON", "lives in", "Gdańsk", "7")], NOW).relations[0]
    assert [graph.name(r.object) for r in graph.contradictions(again)] == ["Sopot"]  # not its own parallel edge
    pet = graph.grow([said("PERSON", "lives in", "Rex", "8", object_kind=EntityKind.PET)], NOW).relations[0]
    assert graph.contradictions(pet) == []  # a place and a pet are not two answers to one question


def test_an_ended_relation_contradicts_nothing() -> None:
    from dataclasses import replace

    graph = PersonGraph("p")
    old = graph.grow([said("PERSON", "lives in", "Gdańsk", "1")], NOW).relations[0]
    graph.relations[old.id] = replace(old, valid_to=NOW)
    new = graph.grow([said("PERSON", "lives in", "Sopot", "2")], NOW).relations[0]
    assert graph.contradictions(new) == []


def test_a_message_reaches_two_hops_but_never_through_the_person() -> None:
    graph = PersonGraph("p")
    graph.grow([said("Ola", "sister of", "PERSON", "1"), said("Ola", "lives in", "Gdańsk", "2"),
                said("Gdańsk", "is near", "Sopot", "3"), said("Rex", "dog of", "PERSON", "4")], NOW)
    roots = graph.mentioned("How is my sister doing?")
    assert [graph.name(r) for r in roots] == ["Ola"]
    reached = {(graph.name(r.subject), graph.name(r.object)): hop for r, hop in graph.neighbourhood(
        roots, 2, shared_only=False)}
    assert reached == {("Ola", SELF_NAME_FOR_TEST): 1, ("Ola", "Gdańsk"): 1, ("Gdańsk", "Sopot"): 2}
    assert not any("Rex" in ends for ends in reached)  # reached only through the person: not reached


SELF_NAME_FOR_TEST = "PERSON"


def test_a_group_reaches_only_what_was_said_in_a_group() -> None:
    graph = PersonGraph("p")
    graph.grow([said("Ola", "lives in", "Gdańsk", "1"), said("Ola", "plays", "cello", "2", scope=Scope.SHARED)], NOW)
    reached = [graph.name(r.object) for r, _hop in graph.neighbourhood(graph.mentioned("Ola"), 2, shared_only=True)]
    assert reached == ["cello"]
    found = who(graph, "Ola", shared_only=True)
    assert found is not None and [link.other for link in found.links] == ["cello"]
    assert graph.resolve("PERSON") == SELF
