"""``bot.py graph show|draw|unmerge|merge``: one person's graph, as the operator reads it and as a picture.

    bot.py graph show    --account telegram:42
    bot.py graph draw    --account telegram:42 --out graph.svg
    bot.py graph unmerge --person p_1234 "Ola K."
    bot.py graph merge   --account telegram:42 "my sister" Ola

``show`` lists every being with its names and kind, then every relation ``subject — relation → object`` with the
person's own words as its receipts, where they said them (a private chat or a shared one) and when it held.
``draw`` writes the picture (:mod:`memory.graph.draw`): the body sends the DOT source, and this command's own
process has Graphviz draw it and writes FILE (mode 600, as ``memory export --out`` writes), whichever process read
the graph. ``unmerge`` gives a name joined to another being a being of its own again, kept apart from then on;
``merge`` joins two names the alias rules did not. The bodies run in the running bot or, with none, in this process
holding the data directory's lock (:mod:`kith.control`); they open the database only, never the memory store.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ground.types import printable_name
from ground.wording import counted
from kith.operator.memory_cli import person_of, shown, write_private
from kith.operator.person_arguments import person_action
from persona.labels import quote

if TYPE_CHECKING:
    from kith.control.parts import Console, Parts
    from memory.graph import GraphBook, PersonGraph, Relation


def add_graph_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``graph`` command and its actions; the caller sets ``func`` on the returned parser."""
    text = "one person's graph: who and what is in their life, how it connects, with receipts"
    parser: argparse.ArgumentParser = subparsers.add_parser("graph", help=text, description=text)
    actions = parser.add_subparsers(dest="graph_action", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        return person_action(actions, name, help_text)

    action("show", "every being with its names and kind, every relation with the person's words")
    draw = action("draw", "the graph as an SVG picture (needs Graphviz's dot)")
    draw.add_argument("--out", metavar="FILE", required=True, help="the SVG file to write (mode 600)")
    unmerge = action("unmerge", "NAME names a being of its own again, never joined to the other automatically")
    unmerge.add_argument("name", help="the name as the person said it, e.g. \"Ola K.\"")
    merge = action("merge", "NAME and INTO are one being")
    merge.add_argument("name")
    merge.add_argument("into")
    return parser


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


async def _display_name(parts: Parts, person: str) -> str:
    from people import directory

    accounts = await parts.db.run(directory.accounts_of, person)
    return next((n for n in (printable_name(a.display_name) for a in accounts) if n), "")


# --- rendering (pure) --------------------------------------------------------------------------
def being_line(graph: PersonGraph, root: str) -> str:
    names = graph.names(root)
    kind = graph.kind(root)
    line = names[0] + (f" ({kind.value})" if kind is not None else "")
    if len(names) > 1:
        line += ", also: " + ", ".join(names[1:])
    return shown("  " + line)


def relation_lines(graph: PersonGraph, relation: Relation, you: str) -> list[str]:
    """``subject — relation → object``, where it was said and when it held, then the person's words."""
    from memory.core import Scope
    from memory.graph import SELF

    def end(value: str) -> str:
        if graph.root(value) == SELF:
            return you
        # The name as said in this receipt, when a merge shows the being by another: a merge stays auditable.
        said = graph.entities[value].name if value in graph.entities else value
        return graph.name(value) + (f" (said as {said})" if said != graph.name(value) else "")

    where = "DM" if relation.scope is Scope.DM else "shared"
    held = (f"held {_when(relation.valid_from)} until {_when(relation.valid_to)} (ended)" if relation.valid_to
            else f"holds since {_when(relation.valid_from)}")
    lines = [f"  {end(relation.subject)} — {relation.relation} → {end(relation.object)}  [{where}] {held}"]
    said = relation.evidence_sentences or relation.evidence
    lines += [f"      {quote(words)}" for words in said] or ["      (no words kept)"]
    lines += [f"      said on {s.platform}, {_when(s.timestamp)}" for s in relation.sources[:1]]
    return [shown(line) for line in lines]


def graph_lines(graph: PersonGraph, person: str, you: str) -> list[str]:
    from memory.graph import SELF

    roots = sorted((r for r in graph.roots() if r != SELF), key=lambda r: (graph.name(r).casefold(), r))
    relations = sorted(graph.relations.values(), key=lambda r: (not r.holds(), r.valid_from, r.id))
    lines = [f"graph of {person}{f' ({you})' if you != 'the person' else ''}: "
             f"{counted(len(roots), 'being', 'beings')}, {counted(len(relations), 'relation', 'relations')}"]
    lines += ["beings:", *(being_line(graph, root) for root in roots)] if roots else []
    lines += ["relations:"] if relations else []
    for relation in relations:
        lines += relation_lines(graph, relation, you)
    return lines


# --- the bodies, run by the bot or by a command holding the lock (kith.control.operations) ----------
async def _opened(parts: Parts, args: argparse.Namespace, console: Console) -> tuple[
        str, GraphBook, PersonGraph] | None:
    person = await person_of(parts, args, console)
    if person is None:
        return None
    from memory.graph import GraphBook

    # In a running bot, the bot's own book (the one capture writes through, with its cache of the graph); with no
    # bot, this command holds the data directory alone, and a book over the database spares opening Chroma.
    book = (await parts.memory()).graph if parts.live else GraphBook(parts.db, parts.clock)
    return person, book, await book.of(person)


async def show_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    opened = await _opened(parts, args, console)
    if opened is None:
        return 2
    person, _book, graph = opened
    you = await _display_name(parts, person) or "the person"
    console.out.write("\n".join(graph_lines(graph, person, you)) + "\n")
    return 0


async def draw_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    """The DOT source on standard output: the command's own process draws it (:func:`save_drawing`)."""
    opened = await _opened(parts, args, console)
    if opened is None:
        return 2
    from memory.graph import dot_source

    person, _book, graph = opened
    name = await _display_name(parts, person)
    title = f"{name or person}: {counted(len(graph.roots()), 'being', 'beings')}, as they told kith"
    console.out.write(dot_source(graph, title=title))
    return 0


def _entity(graph: PersonGraph, name: str, person: str, console: Console) -> str | None:
    from memory.graph import name_key

    entity = graph.by_key.get(name_key(name))
    if entity is None:
        console.err.write(shown(f"kith: {person}'s graph has no name {quote(name)}") + "\n")
    return entity


async def unmerge_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    opened = await _opened(parts, args, console)
    if opened is None:
        return 2
    person, book, graph = opened
    entity = _entity(graph, args.name, person, console)
    if entity is None:
        return 1
    said = graph.entities[entity].name
    if graph.entities[entity].merged_into is None:
        others = graph.names(entity)[1:]
        hint = f"; the names joined to it: {', '.join(others)}" if others else ""
        console.err.write(shown(f"kith: {quote(said)} is not joined to another name{hint}") + "\n")
        return 1
    was = graph.name(entity)
    if not await book.unmerge(person, entity):
        console.err.write(shown(f"kith: {quote(said)} was changed meanwhile; run graph show and try again") + "\n")
        return 1
    console.out.write(shown(f"unmerged {quote(said)} from {was}: a being of its own, kept apart from it") + "\n")
    return 0


async def merge_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    opened = await _opened(parts, args, console)
    if opened is None:
        return 2
    person, book, graph = opened
    entity, into = _entity(graph, args.name, person, console), _entity(graph, args.into, person, console)
    if entity is None or into is None:
        return 1
    if graph.root(entity) == graph.root(into):
        console.err.write(shown(f"kith: {quote(args.name)} and {quote(args.into)} are already one") + "\n")
        return 1
    if not await book.merge(person, entity, into):
        console.err.write("kith: the graph changed meanwhile; run graph show and try again\n")
        return 1
    merged = await book.of(person)
    console.out.write(f"merged {shown(quote(args.name))} into {shown(merged.name(into))}\n"
                      f"{being_line(merged, merged.root(into))}\n")
    return 0


def save_drawing(path: Path, dot: str, err: TextIO) -> int:
    """``draw --out FILE``: Graphviz draws here, in the operator's process, which writes FILE (mode 600)."""
    from memory.graph import CannotDraw, render_svg

    try:
        svg = render_svg(dot)
    except CannotDraw as exc:
        err.write(f"kith: {exc}\n")
        return 1
    try:
        write_private(path, svg.decode("utf-8"))
    except OSError as exc:
        err.write(f"kith: cannot write {path}: {exc.strerror or type(exc).__name__}\n")
        return 1
    err.write(f"kith: drew {path}\n")
    return 0
