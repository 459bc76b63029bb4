"""A person's graph as a picture: Graphviz's DOT language built here (pure), drawn as SVG by Graphviz's own ``dot``.

The person is "you" at the centre (the ``twopi`` layout, rooted at them, which ``dot`` runs when the source asks
for it); every being is one node with its names and kind; every relation type between two beings is one edge
labelled with its words, drawn once however many receipts said it (their count after the words); a relation the
person said has ended is dashed. Names are the person's words, so anything may be in them: every label is an
HTML-like label with its text escaped, and characters no SVG may hold are shown as escapes.
"""

from __future__ import annotations

import html
import unicodedata
from dataclasses import dataclass

from memory.core.graph_records import SELF, Relation
from memory.graph.view import PersonGraph

YOU = "you"
DOT_MISSING = "Graphviz's dot program is not installed: apt-get install graphviz"

# Controls, format characters (bidi overrides, zero-width), surrogates, private use, unassigned and line breaks:
# XML forbids some outright and the rest would make a label lie about what it says.
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_KEPT = frozenset({"\u200d"})  # the zero-width joiner holds emoji sequences together


class CannotDraw(Exception):
    """The drawing failed; the message is one line saying why."""


def text(value: str) -> str:
    """``value`` as the text of an HTML-like label: markup escaped, invisible or forbidden characters as
    visible ``\\uXXXX`` escapes, and every backslash doubled: Graphviz reads its own escapes (``\\N``, the
    node's id; ``\\G``, the graph's) even inside an HTML-like label, after character references are decoded."""
    visible = "".join(f"\\u{ord(c):04x}" if c not in _KEPT and unicodedata.category(c) in _ESCAPED else c
                      for c in value)
    return html.escape(visible, quote=True).replace("\\", "\\\\")


def _id(value: str) -> str:
    """A node id as a DOT quoted string (ids are kith's own, but quoted properly all the same)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class Edge:
    """Every relation of one type between two beings, ended or holding: one line in the picture."""

    subject: str  # a being's root id, or SELF
    words: str  # as first worded
    object: str
    ended: bool
    count: int


def edges(graph: PersonGraph) -> list[Edge]:
    """The edges to draw: relations grouped by (subject, relation type, object, ended), in the order first said."""
    groups: dict[tuple[str, str, str, bool], list[Relation]] = {}
    for r in sorted(graph.relations.values(), key=lambda r: (r.valid_from, r.id)):
        key = (graph.root(r.subject), r.relation_key, graph.root(r.object), not r.holds())
        groups.setdefault(key, []).append(r)
    return [Edge(subject, found[0].relation, obj, ended, len(found))
            for (subject, _key, obj, ended), found in groups.items()]


def _node(graph: PersonGraph, root: str) -> str:
    if root == SELF:
        return f'{_id(SELF)} [label=<<B>{YOU}</B>>, shape=doublecircle, style=filled, fillcolor="#fde68a"];'
    names = graph.names(root) or [graph.name(root)]
    lines = [f"<B>{text(names[0])}</B>"]
    if len(names) > 1:
        lines.append(f"also: {text(', '.join(names[1:]))}")
    kind = graph.kind(root)
    if kind is not None:
        lines.append(f'<FONT POINT-SIZE="10" COLOR="#555555"><I>{text(kind.value)}</I></FONT>')
    return f"{_id(root)} [label=<{'<BR/>'.join(lines)}>];"


def _edge(edge: Edge) -> str:
    words = text(edge.words) + (f" ×{edge.count}" if edge.count > 1 else "")
    style = ', style=dashed, color="#888888", fontcolor="#666666"' if edge.ended else ""
    label = f"{words} (ended)" if edge.ended else words
    return f"{_id(edge.subject)} -> {_id(edge.object)} [label=<{label}>{style}];"


def dot_source(graph: PersonGraph, *, title: str) -> str:
    """``graph`` in the DOT language: the person at the centre, every being, every relation type once."""
    drawn = edges(graph)
    roots = sorted(graph.roots(), key=lambda root: (graph.name(root).casefold(), root))
    ends = [end for e in drawn for end in (e.subject, e.object)]
    nodes = [SELF, *roots, *sorted({end for end in ends if end != SELF and end not in set(roots)})]
    lines = [
        "digraph kith {",
        # twopi puts the root at the centre and everything it reaches on rings around it; overlap and splines
        # keep labels apart and lines off the nodes.
        f'  graph [layout=twopi, root={_id(SELF)}, ranksep=2.2, overlap=false, splines=true, '
        f'label=<{text(title)}>, labelloc=t, fontsize=18, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fillcolor="#eef2ff", fontname="Helvetica", fontsize=13];',
        '  edge [fontname="Helvetica", fontsize=11, color="#4b5563"];',
        *(f"  {_node(graph, node)}" for node in dict.fromkeys(nodes)),
        *(f"  {_edge(edge)}" for edge in drawn),
        "}",
    ]
    return "\n".join(lines) + "\n"


def render_svg(dot: str) -> bytes:
    """``dot`` drawn as SVG by Graphviz's ``dot`` program (through the maintained ``graphviz`` package)."""
    import graphviz  # lazily: only drawing needs it

    try:
        return graphviz.pipe("dot", "svg", dot.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound:
        raise CannotDraw(DOT_MISSING) from None
    except graphviz.CalledProcessError as exc:
        said = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise CannotDraw(f"Graphviz's dot failed: {said[0] if said else f'exit code {exc.returncode}'}") from None
