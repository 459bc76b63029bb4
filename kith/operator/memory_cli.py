"""``bot.py memory``: what kith remembers about one person, with evidence and provenance.

    bot.py memory list   --account telegram:42 [--notes] [--all]
    bot.py memory show   --person p_1234 MEMORY_ID
    bot.py memory search --account telegram:42 QUERY...
    bot.py memory label  --person p_1234 MEMORY_ID NEW LABEL...
    bot.py memory forget --account telegram:42 QUERY... [--yes]
    bot.py memory export --person p_1234 [--out FILE]
    bot.py memory reembed

Every memory shows the person's words first (:func:`memory.core.words_of`: their sentences, quoted, with who
said them, when and where) and kith's label second; ``list`` shows the staged notes kith already uses too, marked
as not yet reviewed, and ``forget`` lists its plan the same way. ``search`` finds what the person's own words hold
as ``/why`` does (:func:`memory.controls.said_matching`: the search index is over labels), then what the label
search ranks. ``label`` corrects a label for the person, their words unchanged, through the same path as
the chat's ``/label`` (:func:`memory.controls.relabel_memory`).

A person is chosen by one of their accounts or by person id. ``forget`` prints its plan first
and deletes only after ``--yes`` or a typed "y" (asked in the operator's terminal, see
:func:`forget_in_terminal`). Each action's body runs in the running bot, or in this process holding the
data directory's lock when no bot runs (:mod:`kith.control`). Nothing heavy is imported until a body
runs, so ``bot.py --help`` and the client's path stay fast.

``reembed`` moves every stored record to the configured embedder's vectors with its progress on standard
error (:mod:`memory.store.reembed`: resumable, and what every start runs too). It runs here, with no bot: a
running bot's store was moved to its embedder when it started, so through the bot it only says what is left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ground.types import printable_name
from ground.wording import counted
from kith.operator.person_arguments import person_action
from memory.core import person_facing, said_of, words_of
from persona.labels import quote, said_words

if TYPE_CHECKING:
    from kith.control.parts import Console, Parts, Stream
    from memory.core import MemoryRecord
    from memory.forgetting import ForgetPlan
    from memory.service import MemoryService
    from memory.store import ChromaCollections, Note, VectorSource

NOT_NEEDED = "not needed by this command"


def add_memory_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``memory`` command and its actions; the caller sets ``func`` on the returned parser."""
    text = "inspect, search, export or forget what kith remembers about one person; re-embed what it stores"
    parser: argparse.ArgumentParser = subparsers.add_parser("memory", help=text, description=text)
    actions = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        return person_action(actions, name, help_text)

    listing = action("list", "the person's memories and the staged notes in use, their words first, with "
                             "evidence and sources")
    listing.add_argument("--notes", action="store_true",
                         help="every staged note capture wrote, the reviewed ones too")
    listing.add_argument("--all", action="store_true", help="also superseded, retired and expired memories")
    show = action("show", "one memory in full: evidence, sources, conflicts, revision")
    show.add_argument("memory_id")
    search = action("search", "the person's memories that match a query")
    search.add_argument("query", nargs="+")
    search.add_argument("--limit", type=int, default=10)
    label = action("label", "correct kith's label for one memory; the person's words stay as they said them")
    label.add_argument("memory_id")
    label.add_argument("label", nargs="+", metavar="LABEL")
    forget = action("forget", "show what matches a query, then delete exactly that (asks first)")
    forget.add_argument("query", nargs="+")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    export = action("export", "everything stored about the person, as JSON")
    export.add_argument("--out", metavar="FILE", help="write to FILE (mode 600) instead of standard output")
    text = ("give every stored memory and note a vector from the configured embedder, with progress; "
            "run it again after an interruption to continue")
    actions.add_parser("reembed", help=text, description=text)
    from kith.operator.heartbeat_cli import add_undo_decay_action

    add_undo_decay_action(actions)
    return parser


async def person_of(parts: Parts, args: argparse.Namespace, console: Console) -> str | None:
    """The person the command names, by person id or by one of their accounts; None (said why) if unknown."""
    from people import directory

    person = args.person or await parts.db.run(directory.person_of, args.account)
    if person is None:
        console.err.write(f"kith: no person has the account {args.account}\n")
    return person


# --- rendering -----------------------------------------------------------------------------
_KEPT_FORMAT = frozenset({"\u200d"})  # the zero-width joiner holds emoji sequences together
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})  # controls, format characters, lone surrogates, line breaks


def shown(text: str) -> str:
    """``text`` for the operator's terminal: control and format characters as visible escapes.

    Memory texts and quotes are other people's words (and a model's): an ESC or OSC sequence in them
    must not rewrite the terminal, and an operator should see that one was there.
    """
    if text.isprintable():
        return text
    return "".join(c.encode("unicode_escape").decode("ascii")
                   if c not in _KEPT_FORMAT and unicodedata.category(c) in _ESCAPED else c for c in text)


def _worded(text: str, name: str) -> str:
    return shown(person_facing(text, you=False, name=name))

def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "-"


def words_line(record: MemoryRecord, *, name: str = "", unreviewed: bool = False) -> str:
    """The person's words a record stands on, every sentence quoted, after who said them, when and where."""
    words = words_of(record)
    if not words.sentences:
        return "    (no words kept: only kith's label)"
    quoted = " ".join(quote(sentence) for sentence in words.sentences)  # every one, whole: the operator audits
    return shown(f"    {said_words(said_of(words, name or 'they', unreviewed=unreviewed), quoted)}")


def words_and_label(record: MemoryRecord, *, name: str = "", unreviewed: bool = False) -> list[str]:
    """The person's words first (:func:`words_line`), kith's label under them: how every listing shows a record."""
    return [words_line(record, name=name, unreviewed=unreviewed), f"    label: {_worded(record.text, name)}"]


def memory_lines(record: MemoryRecord, *, full: bool = False, name: str = "", unreviewed: bool = False) -> list[str]:
    head = (
        f"{record.id}  {record.kind.value}  {record.status.value}  importance {record.importance:.2f}  "
        f"{record.tier.value}  {record.scope.value}  rev {record.revision}"
    )
    if record.pinned:
        head += "  pinned"
    lines = [head, *words_and_label(record, name=name, unreviewed=unreviewed)]
    lines += [f'    evidence: "{shown(quote)}"' for quote in record.evidence]
    lines += [
        f"    source: {s.platform} chat {s.chat_id} message {s.message_id} at {_when(s.timestamp)}"
        for s in record.sources
    ]
    if record.conflicts_with:
        lines.append(f"    conflicts with: {', '.join(record.conflicts_with)}")
    if full:
        lines.append(
            f"    origin {record.origin.value}; created {_when(record.created_at)}; "
            f"updated {_when(record.updated_at)}; expires {_when(record.expires_at)}; "
            f"valid to {_when(record.valid_to)}; used {record.use_count} times"
        )
    return lines


def plan_lines(plan: ForgetPlan, record_id: str, *, name: str = "") -> list[str]:
    """One record of a forget plan: its id, then the person's words and kith's label (:func:`words_and_label`)."""
    record = plan.previews.get(record_id)
    if record is None:  # every id a plan shows has its record; said plainly rather than fail the whole plan
        return [f"  {record_id}"]
    shown_as = words_and_label(record, name=name, unreviewed=record_id in plan.unreviewed)
    return [f"  {record_id}  {record.kind.value}", *("  " + line for line in shown_as)]


def note_lines(note: Note, *, name: str = "") -> list[str]:
    state = (
        f"promoted to {note.promoted_to}"
        if note.promoted_to
        else ("handled, not promoted" if note.promoted_at else "staged")
    )
    lines = memory_lines(note.record, name=name, unreviewed=note.promoted_at is None)
    lines[0] = f"{note.record.id}  note  {note.record.kind.value}  {state}  from {note.conversation or '-'}"
    return lines


async def _name_of(service: MemoryService, person: str) -> str:
    """The person's display name (their first account's that has one), for memory texts the operator reads."""
    from people import directory

    accounts = await service.db.run(directory.accounts_of, person)
    # Stored names may predate the rule that cleans them on the way in: no control sequence reaches the terminal.
    names = (printable_name(a.display_name) for a in accounts)
    return next((n for n in names if n), "")


async def _memory_of(service: MemoryService, person: str, memory_id: str, console: Console) -> MemoryRecord | None:
    """The memory ``memory_id`` if it is ``person``'s; None (said so) if there is none, or it is someone else's."""
    record = await service.get(memory_id)
    if record is None or record.person != person:
        console.err.write(f"kith: {person} has no memory {memory_id}\n")
        return None
    return record


def _print(out: Stream, lines: list[str]) -> None:
    out.write("\n".join(lines) + "\n")


# --- the bodies, run by the bot or by a command holding the lock (kith.control.operations) ----------
async def list_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    person = await person_of(parts, args, console)
    if person is None:
        return 2
    service = await parts.memory()
    out = console.out
    memories = await service.list_memories(person, include_inactive=args.all)
    name = await _name_of(service, person)
    now = service.clock()
    if not args.all:
        memories = [m for m in memories if m.is_live(now)]
    out.write(f"{counted(len(memories), 'memory', 'memories')} of {person}\n")
    for memory in memories:
        _print(out, memory_lines(memory, name=name))
    if args.notes:
        notes = await service.list_notes(person)
        out.write(f"{counted(len(notes), 'staged note', 'staged notes')}\n")
    else:
        # What recall already puts into prompts, though the nightly review has not looked at it yet.
        from memory.controls import notes_in_use

        notes = await notes_in_use(service, person, now)
        out.write(f"{counted(len(notes), 'staged note', 'staged notes')} in use, not yet reviewed\n")
    for note in notes:
        _print(out, note_lines(note, name=name))
    return 0


async def show_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    person = await person_of(parts, args, console)
    if person is None:
        return 2
    service = await parts.memory()
    out = console.out
    record = await _memory_of(service, person, args.memory_id, console)
    if record is None:
        return 1
    name = await _name_of(service, person)
    _print(out, memory_lines(record, full=True, name=name))
    for other_id in record.conflicts_with:
        other = await service.get(other_id)
        if other is not None:
            out.write(f"    {other_id} says: {_worded(other.text, name)}\n")
    return 0


async def search_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    """What the person said that holds the query's words (as ``/why`` finds it), then the label search's hits in
    recall's ranking, at most ``--limit`` in all."""
    from memory.controls import said_matching

    person = await person_of(parts, args, console)
    if person is None:
        return 2
    service = await parts.memory(embedder=True)  # the only action that embeds
    out = console.out
    query = " ".join(args.query)
    # The index is over labels: a word only the person's sentence holds ("Geige" of "plays the violin") is
    # found by their words, the way /why finds it.
    said = (await said_matching(service, person, query, service.clock()))[:args.limit]
    result = await service.search(person, query, args.limit)
    room = max(0, args.limit - len(said))
    ranked = [h for h in result.hits if all(h.record.id != e.record.id for e in said)][:room]
    name = await _name_of(service, person)
    if result.lexical_only:
        out.write(f"note: keyword search only ({result.reason})\n")
    out.write(f"{counted(len(said) + len(ranked), 'match', 'matches')}\n")
    for entry in said:
        lines = memory_lines(entry.record, name=name, unreviewed=entry.unreviewed)
        lines[0] += "  their words match"
        _print(out, lines)
    for hit in ranked:
        lines = memory_lines(hit.record, name=name)
        lines[0] += f"  score {hit.score:.2f}"
        _print(out, lines)
    return 0


async def label_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    """Correct one memory's label for the person; their words, evidence and sources stay as they are."""
    from memory.controls import Refused, relabel_memory

    person = await person_of(parts, args, console)
    if person is None:
        return 2
    service = await parts.memory()
    record = await _memory_of(service, person, args.memory_id, console)
    if record is None:
        return 1
    try:
        stored = await relabel_memory(service, person, record.id, " ".join(args.label), service.clock())
    except Refused as refused:
        why = {"empty": "the label is empty", "too_long": "the label is too long for one memory",
               "instruction": "the label reads as an instruction to kith or a claim of authority over it",
               "not_found": "it is no longer current"}.get(refused.reason.value, refused.reason.value)
        console.err.write(f"kith: label not changed: {why}\n")
        return 1
    parts.changed(person)
    name = await _name_of(service, person)
    _print(console.out, ["relabelled:", *memory_lines(stored, name=name)])
    return 0


async def forget_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    """Print the plan, then delete exactly it: with ``yes``, or when ``expect`` (the ids the operator saw and
    confirmed in their terminal, see :func:`forget_in_terminal`) is still what matches. ``preview`` only
    prints the plan and sends its ids."""
    from memory.forgetting import JournalUnwritable

    person = await person_of(parts, args, console)
    if person is None:
        return 2
    service = await parts.memory()
    out = console.out
    query = " ".join(args.query)
    plan = await service.plan_forget(person, query)
    if args.expect is not None:
        # Every place counts: a plan that only rewrites history rows is asked about and checked like any other.
        if plan.key() != sorted(args.expect) or plan.empty:
            out.write(f"what matches {query!r} changed since you were asked: nothing removed; run it again\n")
            return 1
    elif plan.empty:
        out.write(f"nothing of {person} matches {query!r}\n")
        return 0
    else:
        out.write(f"forgetting {query!r} for {person} removes {plan.describe()}:\n")
        name = await _name_of(service, person)
        for record_id in [*plan.memory_ids, *plan.note_ids]:
            _print(out, plan_lines(plan, record_id, name=name))
        if plan.receipt_ids:
            out.write("kept, but their receipts lose the sentences holding those words:\n")
            for record_id in plan.receipt_ids:
                _print(out, plan_lines(plan, record_id, name=name))
        links = sum(len(v) for v in plan.unlink.values())
        if links:
            out.write(f"and clears {links} conflict flags on {len(plan.unlink)} other memories\n")
        if args.preview:
            console.send_data({"plan": plan.key()})
            return 0
        if not args.yes:
            out.write("nothing removed: re-run with --yes to forget exactly this\n")
            return 1
    try:
        result = await service.apply_forget(plan)
    except JournalUnwritable as exc:  # a full or read-only disk: not begun, nothing changed
        console.err.write(f"kith: {exc}\n")
        return 1
    parts.changed(person, tuple(result.conversations))
    out.write(
        f"forgotten: {result.describe()}; {result.links_removed} conflict flags cleared; {result.tombstones} "
        "tombstones keep them from coming back\n"
    )
    return 0 if result.leftover == 0 else 1


Call = Callable[[dict[str, Any]], tuple[int, Any]]


def forget_in_terminal(call: Call, out: TextIO, stdin: TextIO) -> int:
    """``memory forget`` without ``--yes`` in a terminal: the plan, the question here, then exactly that plan.

    ``call(changes)`` runs the forget body (through the bot, or here) with ``changes`` to its arguments and
    returns its exit code and data. The question is asked in this terminal with nothing held open in the
    bot; if what matches changes before the answer, nothing is removed.
    """
    code, data = call({"preview": True})
    # An empty plan sends no data (there was nothing to ask about); any other plan, however small, is asked.
    if code != 0 or not isinstance(data, dict) or not data.get("plan"):
        return code
    out.write("forget exactly this? [y/N] ")
    out.flush()
    if stdin.readline().strip().lower() not in ("y", "yes"):
        out.write("nothing removed\n")
        return 1
    code, _data = call({"expect": list(data["plan"])})
    return code


async def export_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    """The JSON on standard output; with ``--out`` the command's own process writes it (see save_export)."""
    person = await person_of(parts, args, console)
    if person is None:
        return 2
    from kith.app.person_export import PersonExport
    from memory.forgetting import erase_json

    service = await parts.memory()
    recent = service.forgetter.recent
    with recent.watching() as mark:
        # The document /export gives the person, worded as `memory list` words it, with the display name: the
        # operator reads it, or passes it on.
        exporter = PersonExport(parts.db, service, parts.clock, await parts.person_data())
        data = await exporter.document(person, name=await _name_of(service, person))
        text = json.dumps(data, ensure_ascii=False, indent=2)
        # A forget of theirs that landed while it was put together (a bot runs both at once): its words go too.
        for eraser in recent.since(mark, person):
            text = (erase_json(text.encode("utf-8"), eraser) or b"{}").decode("utf-8")
    console.out.write(text + "\n")
    return 0


async def reembed_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    """Move every stored record to the configured embedder's vectors (with no bot); through a running bot,
    say what is left. Never without a working embedder: hashed vectors would only have to be redone."""
    if parts.live:
        return await _reembed_in_bot(parts, console)
    from memory.encoders import open_embedder
    from memory.store import ChromaCollections, VectorSource

    settings = parts.settings
    embedder, status = await open_embedder(settings)
    if embedder is None or not status.ready:
        console.err.write(f"kith: cannot re-embed, nothing changed: {status.line()}\n")
        return 1
    source = VectorSource(embedder, status)
    try:
        try:
            chroma = await ChromaCollections.connect(settings.memory, settings.storage.data_path())
        except Exception as exc:
            console.err.write(f"kith: cannot open the memory store ({type(exc).__name__}); "
                              "scripts/run doctor says why\n")
            return 1
        try:
            return await _migrate(chroma, source, console)
        finally:
            await chroma.close()
    finally:
        await source.close()


async def _migrate(chroma: ChromaCollections, source: VectorSource, console: Console) -> int:
    from kith.operator.progress import ProgressShown, duration
    from memory.store import Collection, Progress

    space = source.space
    shown = ProgressShown(console.err)
    last = Progress(0, 0)

    def on_progress(progress: Progress) -> None:
        nonlocal last
        if progress.done == 0:
            console.err.write(f"kith: re-embedding {progress.total:,} records into {space}\n")
            console.err.flush()
        last = progress
        shown.update(progress.done, progress.total)

    try:
        records = await chroma.migrate(source, on_progress)
    except BaseException as exc:
        shown.finish()
        why = "interrupted" if not isinstance(exc, Exception) else type(exc).__name__
        console.err.write(f"kith: re-embedding stopped after {last.done:,} of {last.total:,} records ({why}); "
                          "those keep their new vectors: run it again to continue\n")
        if not isinstance(exc, Exception):
            raise
        return 1
    shown.finish()
    if records == 0:
        stored = sum([await chroma.count(kind) for kind in Collection])
        console.out.write(f"nothing to do: all {stored:,} stored records have vectors from {space}\n")
    else:
        console.out.write(f"re-embedded {records:,} records into {space} in {duration(shown.elapsed())}\n")
    return 0


async def _reembed_in_bot(parts: Parts, console: Console) -> int:
    service = await parts.memory()
    store = service.store
    if not store.vector_source.ready:
        console.err.write(f"kith: the running bot cannot re-embed: {store.vector_source.status.line()}\n")
        return 1
    left = await store.chroma.pending(store.vector_source)
    space = store.vector_source.space
    if left == 0:
        console.out.write(f"nothing to do: the running bot has every record's vector from {space}\n")
        return 0
    # Its store and the in-memory indexes built from it are the bot's: vectors are moved at its start.
    console.err.write(f"kith: the running bot has {left:,} records without a vector from {space}: it re-embeds "
                      "them when it next starts, or stop it and run this again\n")
    return 1


def save_export(path: Path, text: str, err: TextIO) -> int:
    """``--out FILE``: written by the operator's process, so the file is theirs and FILE is read from their
    working directory, whichever process produced the JSON."""
    try:
        write_private(path, text)
    except OSError as exc:
        err.write(f"kith: cannot write {path}: {exc.strerror or type(exc).__name__}\n")
        return 1
    err.write(f"kith: wrote {path}\n")  # not on standard output, which may be the file itself
    return 0


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, whole or not at all.

    It is personal data: an existing file at ``path`` keeps neither its content nor its wider mode,
    and a crash mid-write leaves the old file (or none), never half an export. A symlink keeps
    pointing where it did, at the new export; a pipe or device (``/dev/stdout``) is written through.
    """
    if path.exists() and (not path.is_file() or path.absolute().parts[1:2] in (("dev",), ("proc",))):
        # /dev/stdout redirected to a file looks like that file: writing through, appended, keeps what the
        # shell set up (a `>>` too).
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(text)
        return
    target = path.resolve()
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")  # mode 600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _sync_directory(target.parent)


def _sync_directory(directory: Path) -> None:
    """Make the rename itself survive a power cut where the system allows it.

    Best effort: the export is already written. Windows has no directory handles to sync, a directory
    may be writable but not readable, and some filesystems refuse to sync one.
    """
    if not hasattr(os, "O_DIRECTORY"):
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
