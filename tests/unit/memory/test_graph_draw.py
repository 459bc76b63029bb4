"""A person's graph as a picture (issue #33): the DOT source built from a graph (pure), and a real SVG drawn by
Graphviz's own ``dot`` from a graph grown by :meth:`memory.graph.PersonGraph.grow`.

Names are the person's words, so the escaping is tested with the worst of them: quotes, backslashes that
Graphviz would read as its own escapes (``\\N`` is the node's id), markup, bidi overrides and emoji sequences.
"""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memory.core.graph_records import SELF, SELF_NAME, EntityKind, RelationProposal
from memory.core.records import Scope, Source
from memory.graph import CannotDraw, PersonGraph, Proposed, dot_source, render_svg
from memory.graph.draw import DOT_MISSING, edges, text

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
ODD = 'ACME "Big" <b>Co</b> \\N back\\slash \u202eevil'


def said(subject: str, relation: str, obj: str, note: str, *, subject_kind: EntityKind | None = None,
         object_kind: EntityKind | None = None, words: str = "", scope: Scope = Scope.DM) -> Proposed:
    words = words or f"{subject} {relation} {obj}"
    return Proposed(RelationProposal(subject, subject_kind, relation, obj, object_kind), (words,), (words,),
                    (Source("telegram", "42", note, T0),), scope, T0, note_id=note)


def grown() -> PersonGraph:
    graph = PersonGraph("p_ana")
    graph.grow([
        said("Ola", "sister of", SELF_NAME, "n1", subject_kind=EntityKind.PERSON, words="Moja siostra Ola"),
        said("Ola K.", "sister of", SELF_NAME, "n2", subject_kind=EntityKind.PERSON),  # joined to Ola, a 2nd receipt
        said("Ola", "lives in", "Gdańsk", "n3", object_kind=EntityKind.PLACE),
        said(SELF_NAME, "works at", ODD, "n4", object_kind=EntityKind.ORGANISATION),
        said("Reksio 🐕‍🦺", "dog of", SELF_NAME, "n5", subject_kind=EntityKind.PET, scope=Scope.SHARED),
        said(SELF_NAME, "lives in", "Kraków", "n6", object_kind=EntityKind.PLACE),
    ], T0)
    return graph


def ended(graph: PersonGraph, object_name: str) -> PersonGraph:
    for r in list(graph.relations.values()):
        if graph.name(r.object) == object_name:
            graph.relations[r.id] = replace(r, valid_to=T0 + timedelta(days=30))
    return graph


def test_text_escapes_markup_backslashes_and_invisible_characters() -> None:
    assert text('"<b>&') == "&quot;&lt;b&gt;&amp;"
    assert text("a\\Nb") == "a\\\\Nb"  # Graphviz reads \\ as one backslash, and \N never as the node's id
    assert text("x\u202ey\u200bz\x00") == "x\\\\u202ey\\\\u200bz\\\\u0000"
    assert text("👩‍👩‍👧 Zoë") == "👩‍👩‍👧 Zoë"  # the zero-width joiner holds the emoji together


def test_the_person_is_you_and_every_being_one_node_with_its_names_and_kind() -> None:
    graph = grown()
    dot = dot_source(graph, title="Ana's graph")
    assert 'root="self"' in dot and f'"{SELF}" [label=<<B>you</B>>' in dot
    ola = graph.resolve("Ola")
    assert ola is not None and graph.resolve("Ola K.") == ola
    assert f'"{ola}" [label=<<B>Ola</B><BR/>also: Ola K.<BR/>' in dot and "<I>person</I>" in dot
    assert dot.count(" [label=<<B>") == 1 + len(graph.roots())  # you, and each being once (Ola K. is Ola)
    assert "Gdańsk" in dot and "<I>place</I>" in dot and "Reksio 🐕‍🦺" in dot


def test_names_are_escaped_and_the_title_too() -> None:
    dot = dot_source(grown(), title='Ana & "<friends>"')
    assert "label=<Ana &amp; &quot;&lt;friends&gt;&quot;>" in dot
    assert "ACME &quot;Big&quot; &lt;b&gt;Co&lt;/b&gt; \\\\N back\\\\slash \\\\u202eevil" in dot
    assert "<b>Co" not in dot and "\u202e" not in dot


def test_one_edge_per_relation_type_with_its_receipts_counted() -> None:
    graph = grown()
    dot = dot_source(graph, title="t")
    ola = graph.resolve("Ola")
    assert dot.count("sister of") == 1 and f'"{ola}" -> "{SELF}" [label=<sister of ×2>];' in dot
    assert len(edges(graph)) == 5 and len(graph.relations) == 6
    assert "lives in ×" not in dot  # two "lives in" edges, each from one receipt, between different beings


def test_an_ended_relation_is_dashed_and_holding_ones_are_not() -> None:
    graph = ended(grown(), "Kraków")
    dot = dot_source(graph, title="t")
    krakow = graph.resolve("Kraków")
    line = next(line for line in dot.splitlines() if f'-> "{krakow}"' in line)
    assert "style=dashed" in line and "lives in (ended)" in line
    assert sum("style=dashed" in line for line in dot.splitlines()) == 1


def test_an_ended_and_a_holding_relation_of_one_type_are_two_edges() -> None:
    graph = grown()
    graph.grow([said(SELF_NAME, "lives in", "Kraków", "n7", object_kind=EntityKind.PLACE)], T0 + timedelta(days=1))
    first = next(r for r in graph.relations.values() if r.note_id == "n6")
    graph.relations[first.id] = replace(first, valid_to=T0 + timedelta(days=1))
    drawn = [e for e in edges(graph) if e.words == "lives in" and e.subject == SELF]
    assert sorted((e.ended, e.count) for e in drawn) == [(False, 1), (True, 1)]


def test_an_empty_graph_is_you_alone() -> None:
    dot = dot_source(PersonGraph("p_new"), title="nobody yet")
    assert "you" in dot and "->" not in dot


def _dot_or_skip() -> None:
    if shutil.which("dot") is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must have Graphviz: {DOT_MISSING} (.ci/run installs it)")
        pytest.skip(DOT_MISSING)


def test_a_real_svg_drawn_by_dot_holds_every_name_and_relation_word() -> None:
    _dot_or_skip()
    graph = ended(grown(), "Kraków")
    svg = render_svg(dot_source(graph, title="Ana's graph & <friends>"))
    root = ET.fromstring(svg)  # valid XML, escaping and all
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " | ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for words in ("you", "Ola", "also: Ola K.", "Gdańsk", "Kraków", "Reksio 🐕‍🦺", "sister of ×2", "lives in",
                  "works at", "dog of", "lives in (ended)", "Ana's graph & <friends>", "person", "place",
                  'ACME "Big" <b>Co</b> \\N back\\slash \\u202eevil'):
        assert words in texts, words
    assert 'stroke-dasharray="5,2"' in svg.decode()  # the ended relation, dashed


def test_a_missing_dot_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CannotDraw) as caught:
        render_svg(dot_source(grown(), title="t"))
    assert str(caught.value) == "Graphviz's dot program is not installed: apt-get install graphviz"


def test_a_source_dot_refuses_is_one_line_too() -> None:
    _dot_or_skip()
    with pytest.raises(CannotDraw) as caught:
        render_svg("digraph { a -> }")
    assert str(caught.value).startswith("Graphviz's dot failed: ") and "\n" not in str(caught.value)
