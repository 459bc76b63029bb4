"""The person's graph: who and what is in their life and how it connects, every relation with its receipts.

* ``names``: how names and relation words compare (pure).
* ``view``: one person's graph in memory: aliases, contradictions, what a message's names reach, and what a
  batch of proposals adds (pure; the benchmark builds graphs with it too).
* ``tables``: the three tables of the relational store that keep it.
* ``book``: reading and writing it, cached per person.
* ``who``: one being as the person's words tell it ("who is Ola?"), for ``/who``, the recall tool and the CLI.
* ``draw``: the graph as a picture: Graphviz's DOT built here (pure), drawn as SVG by Graphviz's ``dot``.
"""

from memory.core.graph_records import SELF, Entity, EntityKind, Relation
from memory.graph.book import GRAPH, GraphBook
from memory.graph.draw import CannotDraw, dot_source, render_svg
from memory.graph.names import extends, name_key, relation_key, role_key
from memory.graph.tables import GRAPH_TABLES, export_graph
from memory.graph.view import Growth, PersonGraph, Proposed
from memory.graph.who import YOU, Being, Link, being, beings, to_you, who

__all__ = [
    "GRAPH",
    "GRAPH_TABLES",
    "SELF",
    "YOU",
    "Being",
    "CannotDraw",
    "Entity",
    "EntityKind",
    "GraphBook",
    "Growth",
    "Link",
    "PersonGraph",
    "Proposed",
    "Relation",
    "being",
    "beings",
    "dot_source",
    "export_graph",
    "extends",
    "name_key",
    "relation_key",
    "render_svg",
    "role_key",
    "to_you",
    "who",
]
