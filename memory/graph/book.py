"""The graph book: a person's graph read and written through the relational store.

It writes what :meth:`memory.graph.view.PersonGraph.grow` decides, attaches relations to the memories their notes
became, finds the contradictions to ask about, ends relations when the person answers, and undoes a merge. Each
person's graph is cached in this process while nothing has written it (``Database.run_versioned`` with the
``graph`` topic), so recall reads it without a query per message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import TypeVar

from ground.db import Database
from ground.keyed_locks import KeyedLocks
from ground.person_data import PersonData
from memory.graph import tables
from memory.graph.view import Growth, PersonGraph, Proposed

T = TypeVar("T")

log = logging.getLogger("kith.memory.graph")

GRAPH = "graph"  # the Database.mark topic of every graph write
GRAPH_CACHE_PEOPLE = 256  # graphs kept in memory between messages


def _nothing_read(_conn: object) -> None:
    return None


class GraphBook:
    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.clock = clock
        self._locks = KeyedLocks()
        self._cache: dict[str, tuple[Hashable, PersonGraph]] = {}

    async def of(self, person: str) -> PersonGraph:
        """``person``'s graph as stored now (from this process's cache while nothing wrote it)."""
        cached = self._cache.get(person)
        version = self.db.version(GRAPH, max_age_s=1.0)
        if cached is not None and version is None:
            # This process's last transaction is too old to tell: an empty one says, cheaper than the whole graph,
            # and the graph recall indexed stays the same object while nothing wrote it.
            version, _nothing = await self.db.run_versioned(GRAPH, _nothing_read, short=True)
        if cached is not None and version is not None and cached[0] == version:
            return cached[1]
        version, (found, links, pairs) = await self.db.run_versioned(GRAPH, tables.read_graph, person, short=True)
        graph = PersonGraph(person, found, links, pairs)
        if version is not None:
            if len(self._cache) >= GRAPH_CACHE_PEOPLE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[person] = (version, graph)
        return graph

    async def _written(self, fn: Callable[..., T], *args: object) -> T:
        try:
            return await self.db.run(fn, *args)
        finally:
            self.db.mark(GRAPH)

    async def add(self, person: str, proposals: Sequence[Proposed]) -> Growth:
        """Grow ``person``'s graph by ``proposals`` (names joined by the alias rules); what was added."""
        if not proposals:
            return Growth()
        async with self._locks.hold([person]):
            graph = await self._fresh(person)
            growth = graph.grow(proposals, self.clock())
            if growth.entities or growth.relations:
                await self._written(tables.write_growth, growth.entities, growth.relations)
        log.info("graph person=%s names=%d relations=%d merges=%d", person, len(growth.entities),
                 len(growth.relations), len(growth.merges))
        return growth

    async def _fresh(self, person: str) -> PersonGraph:
        """A copy to change: the cached graph is shared with readers."""
        found, links, pairs = await self.db.run(tables.read_graph, person)
        return PersonGraph(person, found, links, pairs)

    async def attach(self, person: str, handled: Sequence[tuple[str, str | None]]) -> list[tuple[str, str]]:
        """Notes became memories (``(note id, memory id)``): their relations point at those memories now. Returns
        the pairs of memories whose relations contradict (new, older), for the gate to link and kith to ask."""
        if not handled:
            return []
        async with self._locks.hold([person]):
            changed = await self._written(tables.attach_memories, handled)
            graph = await self._fresh(person)
        pairs: dict[frozenset[str], tuple[str, str]] = {}
        for rid in changed:
            relation = graph.relations.get(rid)
            if relation is None or relation.memory_id is None:
                continue
            for other in graph.contradictions(relation):
                if other.memory_id and other.memory_id != relation.memory_id:
                    pairs.setdefault(frozenset((relation.memory_id, other.memory_id)),
                                     (relation.memory_id, other.memory_id))
        return list(pairs.values())

    async def answered(self, person: str, no_longer: Sequence[str]) -> int:
        """The person answered a question: the relations of the memories they said are no longer so end now."""
        return await self._written(tables.end_relations, person, list(no_longer), self.clock())

    async def unmerge(self, person: str, entity: str) -> bool:
        """Undo a merge: the name ``entity`` names a being of its own again, kept apart from the one it was
        joined to."""
        async with self._locks.hold([person]):  # a capture growing the graph meanwhile would join them again
            graph = await self._fresh(person)
            if entity not in graph.entities or graph.entities[entity].merged_into is None:
                return False
            root = graph.root(entity)
            return await self._written(tables.set_apart, person, entity, root, self.clock())

    async def merge(self, person: str, entity: str, into: str) -> bool:
        """The person says two names are one: ``entity``'s being joins ``into``'s."""
        async with self._locks.hold([person]):
            graph = await self._fresh(person)
            if entity not in graph.entities or into not in graph.entities:
                return False
            a, b = graph.root(entity), graph.root(into)
            if a == b:
                return False
            return await self._written(tables.join, person, a, b, self.clock())

    def person_data(self) -> PersonData:
        """The graph as kept about a person (:mod:`ground.person_data`)."""
        return PersonData("graph", tables=tables.GRAPH_TABLES, topic=GRAPH, move_rows=tables.move_graph,
                          export_rows=tables.export_graph, forgotten_by="memory.forgetting.scrub.scan")
