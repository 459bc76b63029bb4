"""``bot.py memory``: what kith remembers about one person, with evidence and provenance.

    bot.py memory list   --account telegram:42 [--notes] [--all]
    bot.py memory show   --person p_1234 MEMORY_ID
    bot.py memory search --account telegram:42 QUERY...
    bot.py memory forget --account telegram:42 QUERY... [--yes]
    bot.py memory export --person p_1234 [--out FILE]

A person is chosen by one of their accounts or by person id. ``forget`` prints its plan first
and deletes only after ``--yes`` or a typed "y". Nothing heavy is imported until a command
runs, so ``bot.py --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from core import loop
from core.config import Settings

if TYPE_CHECKING:
    from memory.records import MemoryRecord
    from memory.service import MemoryService
    from memory.store import Note

NOT_NEEDED = "not needed by this command"


def add_memory_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``memory`` command and its actions; the caller sets ``func`` on the returned parser."""
    text = "inspect, search, export or forget what kith remembers about one person"
    parser: argparse.ArgumentParser = subparsers.add_parser("memory", help=text, description=text)
    actions = parser.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text)
        who = sub.add_mutually_exclusive_group(required=True)
        who.add_argument(
            "--account", metavar="PLATFORM:ID", help="one of the person's accounts, e.g. telegram:42"
        )
        who.add_argument("--person", metavar="PERSON_ID", help="the person id, e.g. p_0123456789abcdef")
        return sub

    listing = action("list", "the person's memories with their evidence and sources")
    listing.add_argument("--notes", action="store_true", help="also the staged notes capture wrote")
    listing.add_argument("--all", action="store_true", help="also superseded, retired and expired memories")
    show = action("show", "one memory in full: evidence, sources, conflicts, revision")
    show.add_argument("memory_id")
    search = action("search", "the person's memories that match a query")
    search.add_argument("query", nargs="+")
    search.add_argument("--limit", type=int, default=10)
    forget = action("forget", "show what matches a query, then delete exactly that (asks first)")
    forget.add_argument("query", nargs="+")
    forget.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    export = action("export", "everything stored about the person, as JSON")
    export.add_argument("--out", metavar="FILE", help="write to FILE (mode 600) instead of standard output")
    from heartbeat.cli import add_undo_decay_action

    add_undo_decay_action(actions)
    return parser


def run_memory(
    settings: Settings, args: argparse.Namespace, *, out: TextIO | None = None, stdin: TextIO | None = None
) -> int:
    """The handler ``bot.py memory`` calls. Returns the process exit code."""
    if args.memory_command == "undo-decay":
        from heartbeat.cli import run_undo_decay

        return run_undo_decay(settings, args, out=out)
    return loop.run(_run(settings, args, out or sys.stdout, stdin or sys.stdin))


async def _run(settings: Settings, args: argparse.Namespace, out: TextIO, stdin: TextIO) -> int:
    from core import people
    from core.app import open_database
    from memory.embedders import EmbedderStatus
    from memory.service import MemoryService
    from persona.llm import LLMClient

    db = open_database(settings)
    try:
        person = args.person or await db.run(people.person_of, args.account)
        if person is None:
            print(f"kith: no person has the account {args.account}", file=sys.stderr)
            return 2
        # Only search needs the embedder; the rest need not load (or fetch) a model.
        status = (
            None
            if args.memory_command == "search"
            else EmbedderStatus(settings.memory.embedder, ready=False, reason=NOT_NEEDED)
        )
        service = await MemoryService.open(
            settings, db, LLMClient(settings.llm), status=status, announce=status is None
        )
        try:
            handler = {"list": _list, "show": _show, "search": _search, "forget": _forget, "export": _export}[
                args.memory_command
            ]
            return await handler(service, person, args, out, stdin)
        finally:
            await service.close()
    finally:
        db.close()


# --- rendering -----------------------------------------------------------------------------
def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "-"


def memory_lines(record: MemoryRecord, *, full: bool = False) -> list[str]:
    head = (
        f"{record.id}  {record.kind.value}  {record.status.value}  importance {record.importance:.2f}  "
        f"{record.tier.value}  {record.scope.value}  rev {record.revision}"
    )
    if record.pinned:
        head += "  pinned"
    lines = [head, f"    {record.text}"]
    lines += [f'    evidence: "{quote}"' for quote in record.evidence]
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


def note_lines(note: Note) -> list[str]:
    state = (
        f"promoted to {note.promoted_to}"
        if note.promoted_to
        else ("handled, not promoted" if note.promoted_at else "staged")
    )
    lines = memory_lines(note.record)
    lines[0] = f"{note.record.id}  note  {note.record.kind.value}  {state}  from {note.conversation or '-'}"
    return lines


def _print(out: TextIO, lines: list[str]) -> None:
    out.write("\n".join(lines) + "\n")


# --- actions -------------------------------------------------------------------------------
async def _list(
    service: MemoryService, person: str, args: argparse.Namespace, out: TextIO, _in: TextIO
) -> int:
    memories = await service.list_memories(person, include_inactive=args.all)
    now = service.clock()
    if not args.all:
        memories = [m for m in memories if m.is_live(now)]
    out.write(f"{len(memories)} memories of {person}\n")
    for memory in memories:
        _print(out, memory_lines(memory))
    if args.notes:
        notes = await service.list_notes(person)
        out.write(f"{len(notes)} staged notes\n")
        for note in notes:
            _print(out, note_lines(note))
    return 0


async def _show(
    service: MemoryService, person: str, args: argparse.Namespace, out: TextIO, _in: TextIO
) -> int:
    record = await service.get(args.memory_id)
    if record is None or record.person != person:
        print(f"kith: {person} has no memory {args.memory_id}", file=sys.stderr)
        return 1
    _print(out, memory_lines(record, full=True))
    for other_id in record.conflicts_with:
        other = await service.get(other_id)
        if other is not None:
            out.write(f"    {other_id} says: {other.text}\n")
    return 0


async def _search(
    service: MemoryService, person: str, args: argparse.Namespace, out: TextIO, _in: TextIO
) -> int:
    result = await service.search(person, " ".join(args.query), args.limit)
    if result.lexical_only:
        out.write(f"note: keyword search only ({result.reason})\n")
    out.write(f"{len(result.hits)} matches\n")
    for hit in result.hits:
        lines = memory_lines(hit.record)
        lines[0] += f"  score {hit.score:.2f}"
        _print(out, lines)
    return 0


async def _forget(
    service: MemoryService, person: str, args: argparse.Namespace, out: TextIO, stdin: TextIO
) -> int:
    query = " ".join(args.query)
    plan = await service.plan_forget(person, query)
    if plan.empty:
        out.write(f"nothing of {person} matches {query!r}\n")
        return 0
    out.write(
        f"forgetting {query!r} for {person} removes {len(plan.memory_ids)} memories and "
        f"{len(plan.note_ids)} notes:\n"
    )
    for record_id in (*plan.memory_ids, *plan.note_ids):
        out.write(f"  {record_id}  {plan.previews.get(record_id, '')}\n")
    links = sum(len(v) for v in plan.unlink.values())
    if links:
        out.write(f"and clears {links} conflict flags on {len(plan.unlink)} other memories\n")
    if not args.yes:
        if not stdin.isatty():
            out.write("nothing removed: re-run with --yes to forget exactly this\n")
            return 1
        out.write("forget exactly this? [y/N] ")
        out.flush()
        if stdin.readline().strip().lower() not in ("y", "yes"):
            out.write("nothing removed\n")
            return 1
    result = await service.apply_forget(plan)
    out.write(
        f"forgotten: {result.memories_deleted} memories, {result.notes_deleted} notes, "
        f"{result.links_removed} conflict flags cleared; {result.tombstones} tombstones keep them from "
        "coming back\n"
    )
    return 0 if result.leftover == 0 else 1


async def _export(
    service: MemoryService, person: str, args: argparse.Namespace, out: TextIO, _in: TextIO
) -> int:
    text = json.dumps(await service.export(person), ensure_ascii=False, indent=2) + "\n"
    if not args.out:
        out.write(text)
        return 0
    path = Path(args.out)
    try:
        write_private(path, text)
    except OSError as exc:
        print(f"kith: cannot write {path}: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 1
    print(f"kith: wrote {path}", file=sys.stderr)  # not on standard output, which may be the file itself
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
