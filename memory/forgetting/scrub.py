"""Forgetting beyond the memory store: the words a person asked kith to forget, out of every table.

A forgotten fact lives on in more places than its memory: the message the person said it in, kith's
reply that repeated it, the thread's rolling summary, the day's consolidation summary, the outbox
rows that carried it (an ``/export`` file among them) and a message still waiting in the inbox.
:class:`Eraser` decides what in a text is "the matching text"; :func:`scan` finds it in the
person's rows and, when asked, rewrites it. The plan shown before confirming counts with the same
scan, so it counts every place the forgetting will touch.

What matches: every sentence that holds each content word of the forget query (the same whole-word
rule that picks the memories), and every stretch that quotes a forgotten memory's text, evidence or
receipt sentence. Such a stretch becomes ``FORGOTTEN_MARK``; the rest of the row stays, so a
conversation keeps its shape. A memory that is kept loses such text from its receipt sentences too
(:func:`kept_sentences`). Rows are the person's own messages (forwards included), kith's messages in threads the person
wrote in, those threads' summaries and outbox rows, and the person's messages in the inbox.
Other people's words are theirs to forget.
"""

from __future__ import annotations

import json
import logging
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from delivery import inbox as inbox_table
from delivery.inbox import PayloadError, from_payload, to_payload
from delivery.outbox import outbox
from ground.db import metadata
from ground.private_files import write_private_atomically
from ground.visible_text import visible
from memory.core.graph_records import Relation
from memory.core.text import content_words, normalize, words_match
from memory.graph import tables as graph_tables
from memory.graph.view import PersonGraph
from people import directory, history

log = logging.getLogger("kith.memory.scrub")

FORGOTTEN_MARK = "[forgotten]"
# Declared by the heartbeat, which builds on memory: found by name on the shared schema.
CONSOLIDATION_CHUNKS = "consolidation_chunks"
# The person's goals (also the Database.mark topic of writes to them, so every cached copy is read again).
GOALS = "goals"
# The person's documents and their passages (also the Database.mark topic of writes to them).
DOCUMENTS = "documents"
DOCUMENT_PASSAGES = "document_passages"

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_MARKS = re.compile(r"(?:\[forgotten\][\s.,;:!?…]*){2,}")


@dataclass(frozen=True, slots=True)
class Eraser:
    """What a forget removes from a text: ``query``'s sentences and ``phrases`` (forgotten texts and quotes);
    from an export document also every entry of the forgotten records' ``ids``."""

    query: str
    phrases: tuple[str, ...] = ()
    ids: frozenset[str] = frozenset()

    def erase(self, text: str) -> str:
        """``text`` with every matching stretch replaced by ``FORGOTTEN_MARK`` (pure).

        Matched as written first; a text that holds the words only as the person reads them (composed, a
        decomposed "Zoë" being "Zoë", and without characters that show nothing) is matched in that form,
        and comes back in it. A text that holds nothing to forget comes back exactly as it was."""
        if not text:
            return text
        out = self._redacted(text)
        if out == text:
            seen = readable(text)
            out = self._redacted(seen)
            if out == seen:
                return text
        return _MARKS.sub(FORGOTTEN_MARK + " ", out).strip()

    def _redacted(self, text: str) -> str:
        out = text
        wanted = set(content_words(self.query))
        if wanted:
            parts = []
            at = 0
            for match in _SENTENCE_END.finditer(out):
                parts.append((out[at:match.start()], match.group(0)))
                at = match.end()
            parts.append((out[at:], ""))
            out = "".join((FORGOTTEN_MARK if _holds(sentence, wanted) else sentence) + gap
                          for sentence, gap in parts)
        # Whole sentences first: a quote taken out first could leave its sentence without the query's words.
        for pattern in self._patterns():
            out = pattern.sub(FORGOTTEN_MARK, out)
        return out

    def matches(self, text: str) -> bool:
        return self.erase(text) != text

    def _patterns(self) -> list[re.Pattern[str]]:
        patterns = []
        forms = {form for p in self.phrases if p.strip() for form in (normalize(p), readable(normalize(p)))}
        for phrase in sorted(forms, key=len, reverse=True):
            words = [re.escape(w) for w in phrase.split(" ")]
            # Whole words only: a quote is never taken out of the middle of a longer word.
            patterns.append(re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE))
        return patterns


def readable(text: str) -> str:
    """``text`` composed (NFC) and without the characters that render as nothing, as a reader sees it."""
    return visible(unicodedata.normalize("NFC", text))


def _holds(sentence: str, wanted: set[str]) -> bool:
    if FORGOTTEN_MARK == sentence.strip():
        return False
    have = set(content_words(sentence))
    return all(any(words_match(w, h) for h in have) for w in wanted)


def erase_json(data: bytes, eraser: Eraser) -> bytes | None:
    """An attachment with the eraser applied to every string in it (JSON, as ``/export`` writes), each entry
    of a forgotten record taken out whole (an export words a memory for its reader, "You live in Lisbon",
    which no stored phrase matches); or None when it is not JSON and holds matching text (dropped whole:
    its words cannot be told apart)."""
    redact = eraser.erase
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        text = data.decode("utf-8", errors="replace")
        return None if redact(text) != text else data

    def forgotten(value: Any) -> bool:
        return isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"] in eraser.ids

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value)
        if isinstance(value, list):
            return [walk(v) for v in value if not forgotten(v)]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    cleaned = walk(parsed)
    if cleaned == parsed:
        return data
    return json.dumps(cleaned, ensure_ascii=False, indent=2).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Places:
    """Rows outside the memory store that hold the matching text: counted for the plan, rewritten on apply."""

    history: int = 0
    summaries: int = 0
    outbox: int = 0
    inbox: int = 0
    saved_exports: int = 0  # export files the terminal chat saved under the data directory
    goals: int = 0  # the person's goals that hold the words: they go whole ("[forgotten]" is no goal to pursue)
    graph: int = 0  # relations whose receipts hold the words, and names nothing else supports (memory.graph)
    documents: int = 0  # the person's documents whose name or text holds the words: they go whole

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


def scrub_saved_exports(directory: Path | None, person: str, eraser: Eraser, *, apply: bool) -> int:
    """The person's export files saved under ``directory`` (the terminal chat's ``/export``) that hold the words:
    counted, and on ``apply`` rewritten with the words marked forgotten (whole or not at all). Files of other
    people, and files that are not an export, are left alone."""
    if directory is None or not directory.is_dir():
        return 0
    touched = 0
    for path in sorted(directory.glob(".*.json.*.tmp")):
        # A save cut short (killed mid-write) leaves its temporary copy: the whole export, unredacted, never
        # completed. One of a save under way in this process is left to finish (and be scrubbed as the file).
        if path.name.rsplit(".", 2)[-2] == str(os.getpid()):
            continue
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        if eraser.erase(text) == text and not any(i in text for i in eraser.ids):
            continue
        touched += 1
        if apply:
            _apply_to_file(path, None)
    for path in sorted(directory.glob("*.json")):
        try:
            data = path.read_bytes()
            owner = json.loads(data.decode("utf-8")).get("person")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        if owner != person:
            continue
        cleaned = erase_json(data, eraser)
        if cleaned is None or cleaned == data:
            continue
        touched += 1
        if apply:
            _apply_to_file(path, cleaned)
    return touched


def _apply_to_file(path: Path, cleaned: bytes | None) -> None:
    """Write ``cleaned`` over the file (None: remove it). A file that cannot be changed (a full or read-only
    disk) is logged and left: the forget's count of what is left after it names it, and the rest goes on."""
    try:
        if cleaned is None:
            path.unlink(missing_ok=True)
        else:
            write_private_atomically(path, cleaned)
    except OSError as exc:
        log.warning("forget could not rewrite a saved export error=%s", type(exc).__name__)


def reassign_saved_exports(directory: Path | None, old: str, new: str) -> int:
    """The export files saved for person ``old`` now name ``new`` (a link or merge moved them): a later forget
    by ``new`` reaches them. Returns how many files changed."""
    if directory is None or not directory.is_dir():
        return 0
    moved = 0
    for path in sorted(directory.glob("*.json")):
        try:
            document = json.loads(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if not isinstance(document, dict) or document.get("person") != old:
            continue
        document["person"] = new
        try:
            write_private_atomically(path, json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8"))
        except OSError as exc:  # the rest still move; this one keeps the old id until it can be written
            log.warning("saved export not moved to its new person error=%s", type(exc).__name__)
            continue
        moved += 1
    return moved


@dataclass(frozen=True, slots=True)
class Scanned:
    places: Places
    conversations: tuple[str, ...]  # threads whose history or summary changed (their cached windows are stale)
    # The newest history row the scan saw: a reply recorded after it was written without this scan's redaction.
    through_id: int = 0


def scan(conn: Connection, person: str, eraser: Eraser, *, apply: bool) -> Scanned:
    """Count (and with ``apply`` rewrite) the person's rows that hold the matching text."""
    accounts = [a.account for a in directory.accounts_of(conn, person)]
    rows, summaries, conversations, chats = history.forget_text(conn, person=person, accounts=accounts,
                                                               redact=eraser.erase, apply=apply)
    consolidated = _consolidation_summaries(conn, person, eraser, apply=apply)
    recipients = {tuple(a.split(":", 1)) for a in accounts if ":" in a}
    sent = _outbox(conn, chats, recipients, eraser, apply=apply)
    waiting = _inbox(conn, set(accounts), chats, eraser, apply=apply)
    goals = _goals(conn, person, eraser, apply=apply)
    graph = _graph(conn, person, eraser, apply=apply)
    kept_documents = _documents(conn, person, eraser, apply=apply)
    through = int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(history.messages.c.id), 0))).scalar_one())
    return Scanned(Places(rows, summaries + consolidated, sent, waiting, goals=goals, graph=graph,
                          documents=kept_documents),
                   tuple(sorted(conversations)), through)


def scrub_late_reply(conn: Connection, reply_id: int, platform: str, chat_id: str, source: str,
                     eraser: Eraser) -> int:
    """A reply whose turn began before a forget but was recorded after its scan: its history row and the outbox
    rows carrying it (found by the message they answer) lose the matching text. Nothing else is touched: a
    message said after the forget is heard again. Returns the rows rewritten."""
    m = history.messages
    changed = 0
    row = conn.execute(sa.select(m.c.text).where(m.c.id == reply_id, m.c.role != "user")).first()
    if row is not None and (text := eraser.erase(row.text)) != row.text:
        conn.execute(m.update().where(m.c.id == reply_id).values(text=text))
        changed += 1
    for sent in conn.execute(sa.select(outbox.c.id, outbox.c.text).where(
            outbox.c.platform == platform, outbox.c.chat_id == chat_id, outbox.c.source == source)).all():
        text = eraser.erase(sent.text)
        if text != sent.text:
            conn.execute(outbox.update().where(outbox.c.id == sent.id).values(text=text))
            changed += 1
    return changed


def _outbox(conn: Connection, chats: set[tuple[str, str]], recipients: set[tuple[str, ...]],
            eraser: Eraser, *, apply: bool) -> int:
    if not chats and not recipients:
        return 0
    platforms = {p for p, _c in chats} | {r[0] for r in recipients}
    query = sa.select(outbox.c.id, outbox.c.platform, outbox.c.chat_id, outbox.c.recipient_id, outbox.c.text,
                      outbox.c.attachment, outbox.c.attachment_name).where(outbox.c.platform.in_(sorted(platforms)))
    found = 0
    for row in conn.execute(query.order_by(outbox.c.id)).all():
        if (row.platform, row.chat_id) not in chats and (row.platform, row.recipient_id or "") not in recipients:
            continue
        text = eraser.erase(row.text)
        attachment = row.attachment
        if attachment is not None:
            attachment = erase_json(bytes(attachment), eraser)
        if text == row.text and attachment == row.attachment:
            continue
        found += 1
        if apply:
            # A file that cannot be cleaned goes whole: the reply's text still says what it was.
            conn.execute(outbox.update().where(outbox.c.id == row.id).values(
                text=text, attachment=attachment, attachment_name=row.attachment_name if attachment else None))
    return found


def _inbox(conn: Connection, accounts: set[str], chats: set[tuple[str, str]], eraser: Eraser, *,
           apply: bool) -> int:
    table = inbox_table.inbox
    found = 0
    for row in conn.execute(sa.select(table.c.id, table.c.payload).order_by(table.c.id)).all():
        try:
            message = from_payload(row.payload)
        except PayloadError:
            continue  # the inbox answers an unreadable row honestly and drops it
        if message.account not in accounts and (message.platform, message.chat_id) not in chats:
            continue
        if message.text.startswith("/"):
            continue  # a command, the /forget being answered among them: it leaves the inbox with its answer
        text = eraser.erase(message.text)
        if text == message.text:
            continue
        found += 1
        if apply:
            fields_ = json.loads(to_payload(message))
            fields_["text"] = text
            conn.execute(table.update().where(table.c.id == row.id).values(
                payload=json.dumps(fields_, ensure_ascii=True)))
    return found


def _goals(conn: Connection, person: str, eraser: Eraser, *, apply: bool) -> int:
    """The person's goals (any status) that hold the words: counted, and on ``apply`` deleted."""
    table = metadata.tables.get(GOALS)
    if table is None:
        return 0
    ids = [row.id for row in conn.execute(sa.select(table.c.id, table.c.text).where(table.c.person == person))
           if eraser.matches(row.text)]
    if apply and ids:
        conn.execute(table.delete().where(table.c.id.in_(ids)))
    return len(ids)


def _documents(conn: Connection, person: str, eraser: Eraser, *, apply: bool) -> int:
    """The person's documents whose name or text holds the words: counted, and on ``apply`` deleted whole with
    their passages (a document with a sentence cut out of it is no longer what they shared)."""
    table, parts = metadata.tables.get(DOCUMENTS), metadata.tables.get(DOCUMENT_PASSAGES)
    if table is None or parts is None:
        return 0
    ids = [row.id for row in conn.execute(sa.select(table.c.id, table.c.name, table.c.text)
                                          .where(table.c.person == person))
           if eraser.matches(row.name) or eraser.matches(row.text)]
    if apply and ids:
        conn.execute(parts.delete().where(parts.c.document_id.in_(ids)))
        conn.execute(table.delete().where(table.c.id.in_(ids)))
    return len(ids)


def _graph(conn: Connection, person: str, eraser: Eraser, *, apply: bool) -> int:
    """The person's graph without the words: a relation goes when a receipt or a name of it holds them, or its
    memory or note is forgotten; a name goes when it holds them, and so does every name no remaining relation
    supports (directly, or as another name of the being a remaining relation names). Relations are deleted, not
    rewritten: a relation is its receipts. Counted, and on ``apply`` deleted."""
    graph = PersonGraph(person, *graph_tables.read_graph(conn, person))
    named_gone = {i for i, e in graph.entities.items() if eraser.matches(e.name)}

    def goes(r: Relation) -> bool:
        if r.memory_id in eraser.ids or r.note_id in eraser.ids or r.subject in named_gone or r.object in named_gone:
            return True
        names = (graph.entities[end].name for end in r.ends if end in graph.entities)
        return any(t and eraser.matches(t) for t in (*r.evidence, *r.evidence_sentences, r.relation, *names))

    relations_gone = [r.id for r in graph.relations.values() if goes(r)]
    gone = set(relations_gone)
    supported = {end for r in graph.relations.values() if r.id not in gone for end in r.ends} - named_gone
    supported |= {graph.root(e) for e in supported}
    entities_gone = [i for i in graph.entities if i not in supported]
    if apply:
        graph_tables.delete_relations(conn, relations_gone)
        graph_tables.delete_entities(conn, person, entities_gone)
    return len(relations_gone) + len(entities_gone)


def _consolidation_summaries(conn: Connection, person: str, eraser: Eraser, *, apply: bool) -> int:
    table = metadata.tables.get(CONSOLIDATION_CHUNKS)
    if table is None:
        return 0
    found = 0
    for row in conn.execute(sa.select(table.c.id, table.c.summaries).where(
            table.c.summaries.contains(person))).all():
        try:
            by_person = json.loads(row.summaries)
        except ValueError:
            continue
        if not isinstance(by_person, dict) or not isinstance(by_person.get(person), str):
            continue
        text = eraser.erase(by_person[person])
        if text == by_person[person]:
            continue
        found += 1
        if apply:
            by_person[person] = text
            conn.execute(table.update().where(table.c.id == row.id).values(summaries=json.dumps(by_person)))
    return found


def checkpoint(conn: Connection) -> tuple[int, int, int]:
    """Copy SQLite's write-ahead log into the database and empty it, so the words rewritten above are
    nowhere in the log file; (busy, log frames, frames copied) as SQLite reports them, (0, 0, 0) elsewhere.

    Run as the first statement of its transaction: SQLite refuses a checkpoint inside one.
    """
    if conn.dialect.name != "sqlite":
        return (0, 0, 0)
    row = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").first()
    return (int(row[0]), int(row[1]), int(row[2])) if row is not None else (0, 0, 0)


def phrases_of(texts: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(normalize(t) for t in texts if t.strip()))


def kept_sentences(sentences: Sequence[str], quotes: Sequence[str], eraser: Eraser) -> tuple[str, ...]:
    """The receipt sentences a memory that is not itself forgotten keeps after a forget (pure).

    A sentence without the matching text stays as it was. One with it loses that text; if what is left
    still holds one of the memory's quotes, it stays in that redacted form, else it goes and the quote
    alone is the receipt (``/why`` shows the quote when no sentence holds it). So "I have a cat named
    Mruczek" behind "has a cat" goes after ``/forget Mruczek``: the fact was never asked to be forgotten,
    the name was, and a receipt reading "[forgotten]" would prove nothing.
    """
    folded = [normalize(q).casefold() for q in quotes if q.strip()]
    out = []
    for sentence in sentences:
        redacted = eraser.erase(sentence)
        if redacted == sentence:
            out.append(sentence)
        elif any(q in normalize(redacted).casefold() for q in folded):
            out.append(redacted)
    return tuple(dict.fromkeys(out))


__all__ = [
    "FORGOTTEN_MARK",
    "Eraser",
    "Places",
    "Scanned",
    "checkpoint",
    "erase_json",
    "kept_sentences",
    "phrases_of",
    "reassign_saved_exports",
    "scan",
    "scrub_late_reply",
]
