"""What a person's graph adds to one recall: which beings the query selects, and which memories their relations
came from. Pure functions over :class:`memory.graph.view.PersonGraph`, no I/O.

A being is selected two ways: the query names it (:meth:`PersonGraph.mentioned`), or a relation of one of the
best candidates touches it (the query matched a memory about "the pottery class": other memories about the
pottery class are its context, said in other words and other sessions). Each selected being is a *group*: the
memories of the relations that touch it. ``hops`` 2 also selects the beings one relation away from a selected one.

Recall ranks with the groups (:func:`memory.recall.ranking.graph_lifts`): a memory of a group gets a share of the
best score among the group's other memories, as a memory said next to a strong match does in its chat. Members
that neither search path found are fetched, so a memory joined to the query only through the graph can come up.

A hub (:meth:`PersonGraph.is_hub`: a being with more than ``hub`` relations; the person themselves, whom everything
they say touches, the graph leaves out altogether) still lifts the candidates that touch it, but nothing is fetched
through it and it is not expanded (:meth:`PersonGraph.neighbourhood` never passes through one): it would reach
everything and so select nothing.

Privacy: only ``graph``'s relations (one person's graph), only those that hold now, and with ``shared_only`` only
relations said where a group may hear them; the memories themselves still pass recall's own isolation rule.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from memory.core.graph_records import SELF, Relation
from memory.core.records import Scope
from memory.graph.view import PersonGraph

NAMED = -1  # a group's ``seed`` when the query names it (or it is reached from a being the query names)


@dataclass(frozen=True, slots=True)
class GraphGroup:
    """The memories of the relations touching one selected being."""

    being: str  # its root entity id
    level: int  # 1: selected itself; 2: one relation away from a selected being
    seed: int  # NAMED, or the rank of the best candidate whose relation selected it (0 = the best)
    members: frozenset[str]  # memory ids (candidates, and for a being that is not a hub, every one it reaches)

    def counts(self, hops: int, from_best: int) -> bool:
        """Whether this group takes part under the settings ``hops`` and ``from_best``."""
        return self.level <= hops and (self.seed == NAMED or self.seed < from_best)


@dataclass(frozen=True, slots=True)
class GraphReach:
    groups: list[GraphGroup] = field(default_factory=list)
    fetch: list[str] = field(default_factory=list)  # member ids beyond the candidates, smallest groups first
    # By memory id, its relations that touch a selected being, with that being (what the prompt may show).
    relations: dict[str, list[tuple[str, Relation]]] = field(default_factory=dict)
    graph: PersonGraph | None = None  # the graph this reach was found in (its beings' names)


def by_memory(graph: PersonGraph) -> dict[str, list[Relation]]:
    """Each memory's relations (an index recall keeps per graph: a graph changes far less often than it is read)."""
    out: dict[str, list[Relation]] = {}
    for r in graph.relations.values():
        if r.memory_id is not None and r.person == graph.person:
            out.setdefault(r.memory_id, []).append(r)
    return out


def _receipted(r: Relation, person: str) -> bool:
    return r.person == person and r.memory_id is not None


def _usable(r: Relation, person: str, shared_only: bool) -> bool:
    return _receipted(r, person) and r.holds() and (not shared_only or r.scope is Scope.SHARED)


def reach(graph: PersonGraph, index: Mapping[str, Sequence[Relation]], query: str, best: Sequence[str],
          candidates: Collection[str], *, hops: int, from_best: int, shared_only: bool, hub: int,
          fetch_max: int) -> GraphReach:
    """The groups the query selects in ``graph`` and the memories to fetch for them.

    ``best``: the candidates' ids best first (their relations' beings are selected when ``from_best`` > 0);
    ``candidates``: every id either path found; ``index``: :func:`by_memory` of ``graph``.
    """
    person = graph.person
    seeds: dict[str, int] = {}
    for root in graph.mentioned(query):
        if root != SELF:
            seeds[root] = NAMED
    for rank, memory_id in enumerate(best[:max(0, from_best)]):
        for r in index.get(memory_id, ()):
            if _usable(r, person, shared_only):
                for end in (graph.root(r.subject), graph.root(r.object)):
                    if end != SELF:
                        seeds.setdefault(end, rank)
    if not seeds:
        return GraphReach()
    selected: dict[str, tuple[int, int]] = {being: (1, seed) for being, seed in seeds.items()}
    if hops >= 2:
        for being, seed in seeds.items():
            for r, _hop in graph.neighbourhood([being], 1, shared_only=shared_only, hub=hub):
                if not _receipted(r, person):
                    continue
                for end in (graph.root(r.subject), graph.root(r.object)):
                    if end != SELF and end not in seeds:
                        level, was = selected.get(end, (2, seed))
                        selected[end] = (level, min(was, seed))
    # Candidates join the groups of the beings their relations touch (a hub's too).
    members: dict[str, set[str]] = {being: set() for being in selected}
    relations: dict[str, dict[tuple[str, str], Relation]] = {}
    for memory_id in candidates:
        for r in index.get(memory_id, ()):
            if not _usable(r, person, shared_only):
                continue
            for end in {graph.root(r.subject), graph.root(r.object)}:
                if end in members:
                    members[end].add(memory_id)
                    relations.setdefault(memory_id, {})[(end, r.id)] = r
    # Beings that are not hubs reach every memory of their relations.
    sizes: dict[str, int] = {}
    for being in selected:
        sizes[being] = len(graph.touching(being))
        for r, _hop in graph.neighbourhood([being], 1, shared_only=shared_only, hub=hub):
            if _receipted(r, person):
                assert r.memory_id is not None
                members[being].add(r.memory_id)
                relations.setdefault(r.memory_id, {})[(being, r.id)] = r
    fetch: dict[str, None] = {}
    for being in sorted(selected, key=lambda b: (sizes[b], selected[b][0], b)):  # the most specific first
        for memory_id in sorted(members[being]):
            if len(fetch) >= fetch_max:
                break
            if memory_id not in candidates:
                fetch[memory_id] = None
    groups = [GraphGroup(being, level, seed, frozenset(members[being]))
              for being, (level, seed) in sorted(selected.items()) if members[being]]
    return GraphReach(groups, list(fetch),
                      {i: [(being, r) for (being, _rid), r in found.items()] for i, found in relations.items()},
                      graph)


def shown_relations(shown: Sequence[str], relations: Mapping[str, Sequence[tuple[str, Relation]]],
                    groups: Sequence[GraphGroup], limit: int) -> list[Relation]:
    """The relations that brought ``shown`` (memory ids the graph lifted, best first) in: each one's relations
    through a group that counted and holds it, in that order, at most ``limit``."""
    if limit <= 0 or not groups:
        return []
    holding = {g.being: g.members for g in groups}
    out: dict[str, Relation] = {}
    for memory_id in shown:
        for being, r in relations.get(memory_id, ()):
            if memory_id in holding.get(being, ()):
                out.setdefault(r.id, r)
                if len(out) >= limit:
                    return list(out.values())
    return list(out.values())
