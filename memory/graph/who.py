""""Who is Ola?": one being of a person's graph as the person's own words tell it (pure).

:func:`who` finds the being a name names (any of its names, or a role of the person's own, "my sister") and
gathers every relation touching it, each read from that being's side ("sister of you", "lives in Gdańsk") with the
words that say it. ``/who`` and the recall tool read a being this way (``bot.py graph show`` lists every relation
of the graph as it stands instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.core.graph_records import SELF, EntityKind, Relation
from memory.core.records import Scope, Source
from memory.graph.view import PersonGraph

YOU = "you"  # how the person is named to themselves


@dataclass(frozen=True, slots=True)
class Link:
    """One relation seen from a being: ``relation`` to ``other`` (or from ``other``, when ``outgoing`` is False)."""

    relation: str
    other: str  # the other end's name, or YOU
    outgoing: bool  # the being is the relation's subject
    words: tuple[str, ...]  # the person's sentences that say it
    sources: tuple[Source, ...]
    scope: Scope
    valid_from: datetime
    valid_to: datetime | None
    memory_id: str | None

    def reads(self, name: str) -> str:
        """The relation as a line from ``name``'s side: "Ola sister of you", "Rex dog of Ola"."""
        return f"{name} {self.relation} {self.other}" if self.outgoing else f"{self.other} {self.relation} {name}"


@dataclass(frozen=True, slots=True)
class Being:
    root: str
    name: str
    other_names: tuple[str, ...]
    kind: EntityKind | None
    links: tuple[Link, ...]  # holding ones first, then those that ended; newest first within each


def _link(graph: PersonGraph, relation: Relation, root: str) -> Link:
    outgoing = graph.root(relation.subject) == root
    other = relation.object if outgoing else relation.subject
    return Link(relation.relation, YOU if other == SELF else graph.name(other), outgoing,
                relation.evidence_sentences or relation.evidence, relation.sources, relation.scope,
                relation.valid_from, relation.valid_to, relation.memory_id)


def being(graph: PersonGraph, root: str, *, shared_only: bool = False) -> Being | None:
    """The being ``root`` with every relation touching it (only those said where others could read them, with
    ``shared_only``); None when nothing that may be shown names it."""
    relations = [r for r in graph.touching(root) if not shared_only or r.scope is Scope.SHARED]
    if not relations:
        return None
    ordered = sorted(relations, key=lambda r: (r.valid_to is not None, -r.valid_from.timestamp()))
    names = graph.names(root)
    return Being(root, names[0], tuple(names[1:]), graph.kind(root),
                 tuple(_link(graph, r, root) for r in ordered))


def who(graph: PersonGraph, name: str, *, shared_only: bool = False) -> Being | None:
    """The being ``name`` names in ``graph`` (None when no one, or when the name could be several)."""
    root = graph.resolve(name.strip())
    if root is None:
        mentioned = graph.mentioned(name)
        root = mentioned[0] if len(mentioned) == 1 else None
    if root is None or root == SELF:
        return None
    return being(graph, root, shared_only=shared_only)


def beings(graph: PersonGraph, *, shared_only: bool = False) -> list[Being]:
    """Every being of the graph that may be shown, those with most relations first."""
    found = [b for root in graph.roots() if (b := being(graph, root, shared_only=shared_only)) is not None]
    return sorted(found, key=lambda b: (-len(b.links), b.name.casefold()))


def to_you(being_: Being) -> Sequence[Link]:
    """The being's holding relations to the person themselves ("sister of you"): what a listing names first."""
    return [link for link in being_.links if link.other == YOU and link.valid_to is None]
