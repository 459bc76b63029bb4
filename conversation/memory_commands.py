"""The person's memory controls in chat, the same on every platform, and kith's conflict questions.

Commands (registered in :class:`~conversation.chat_commands.ChatCommands`, so Telegram's menu shows them):
``/memory [page]``, ``/why <number, words or id>``, ``/remember <text>``, ``/label <number or id> <new label>``,
``/pin``/``/unpin <id or words>``, ``/forget <words>`` (shows the plan; deletes only after the person confirms),
``/export``, ``/pause`` and ``/resume``. They work in a DM only; in a group they say so and show nothing.

The person's words come first, kith's label second: ``/memory``, ``/why`` and the conflict questions quote what
they said (:func:`memory.core.words_of`), with where and when, and show the label (the extractor's paraphrase,
which ``/label`` corrects) under it. ``/memory`` and ``/why`` show everything kith uses, the staged notes recall
already puts into prompts too, each marked as not yet reviewed. A ``/forget`` plan lists what goes, and what keeps
its fact but loses a sentence, the same way (:func:`plan_line`).

Buttons: ``q:<question id>:<answer>`` answers a conflict question, ``f:<token>:yes|no`` confirms or
cancels a forget plan. Every button has a typed twin ("first", "2", "both", "neither"; "yes"/"no")
that :meth:`MemoryCommands.answer_if_pending` takes before the conversation, so the terminal and
any platform without buttons work the same.

:class:`QuestionSender` asks a person about their flagged facts: in the DM they are talking in, or
the DM they last used (``people.history``), never in a group; its outbox entry is written in the same
transaction as the question, so a question is never open without being on its way.

The operations live in :mod:`memory.controls.person_controls` and the "only the person" rule in
:mod:`memory.controls.authorisation`; this module only translates between chat and those operations.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from conversation.chat_commands import ChatCommands
from delivery.posting import Outbound
from ground.db import Database
from ground.keyed_locks import KeyedLocks
from ground.tunables import (
    FORGET_PREVIEW_MAX,
    QUESTION_AFTER_REPLY_S,
    QUESTION_QUOTE_CHARS,
    QUESTION_RECHECK_S,
    WHY_RECEIPTS,
)
from ground.turns import CompletedTurn
from ground.types import Button, ButtonPress, ChatKind, InboundMessage, OutboundMessage, reply_to
from ground.wording import counted
from memory.capture import Outcome
from memory.controls import (
    Answer,
    ConflictPair,
    DmTarget,
    MemoryControls,
    Question,
    QuestionBook,
    RefusalReason,
    Refused,
    Requester,
    Resolution,
    askable_pairs,
    caps_allow,
    parse_answer,
    pick_pair,
)
from memory.core import MemoryRecord, Origin, Scope, Source, Status, person_facing, said_at, words_of
from memory.forgetting import ForgetPlan, JournalUnwritable, describe_places, erase_json
from memory.graph import Being, Link, to_you
from memory.service import MemoryService
from people import directory, history

log = logging.getLogger("kith.memory.commands")

DM_ONLY = "That works in a private chat with me only: message me directly and ask again there."

WHO_LINKS = 12  # relations /who lists; the export has every one
GRAPH_LINE_BEINGS = 8  # names /memory lists
_MARKDOWN_SPECIALS = frozenset("\\`*_[]~|")
_CONFIRM = {"yes", "y", "yes please", "confirm", "forget them", "tak"}
_CANCEL = {"no", "n", "cancel", "stop", "nie", "anuluj"}
_ANSWER_LABELS = (
    (Answer.FIRST, "The first"),
    (Answer.SECOND, "The second"),
    (Answer.BOTH, "Both are true"),
    (Answer.NEITHER, "Neither"),
)


# --- pure rendering ----------------------------------------------------------------------------------
def yours(text: str) -> str:
    """A memory's text as its person reads it: every message here goes to their own DM."""
    return person_facing(text, you=True)


def literal(text: str) -> str:
    """Stored words shown as they are: Markdown characters in them must not become formatting."""
    return "".join(f"\\{c}" if c in _MARKDOWN_SPECIALS else c for c in text)


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _where(scope: Scope, platform: str) -> str:
    chat = "a private chat" if scope is Scope.DM else "a group chat"
    return f"in {chat} on {platform}"


_VERB = {Origin.HEARD: "you said", Origin.READ: "I read", Origin.THOUGHT: "I concluded",
         Origin.DID: "I did"}
NO_WORDS = "(no words of yours kept)"  # a record with no receipt at all, which no current path writes
UNREVIEWED = "not yet reviewed"  # a staged note: recall uses it already; the nightly review has not looked at it
WORDS_CUT = " (words quoted from a longer sentence)"


def said(record: MemoryRecord) -> str:
    """The person's newest words a memory stands on, quoted as they said them (never kith's label)."""
    sentences = words_of(record).sentences
    return f"“{literal(clip(sentences[-1], QUESTION_QUOTE_CHARS))}”" if sentences else NO_WORDS


def label_line(record: MemoryRecord, *, starts: bool = False) -> str:
    """Kith's label for a memory, shown after the words it stands on (``starts``: it begins a sentence)."""
    return f"{'My' if starts else 'my'} label: {literal(clip(yours(record.text), QUESTION_QUOTE_CHARS))}"


def receipt(record: MemoryRecord) -> str:
    """One line of provenance, words first: who said it (or how kith knows), their newest words, where and when."""
    source = max(record.sources, key=lambda s: s.timestamp, default=None)
    where = _where(record.scope, source.platform) if source is not None else ""
    when = said_at(record).date().isoformat()
    cut = "" if words_of(record).whole else WORDS_CUT
    return f"{_VERB[record.origin]} {said(record)}{cut} {where}, {when}".replace("  ", " ")


def question_text(pair: ConflictPair) -> str:
    return "\n".join([
        "Two things you told me disagree. Which is right?",
        "",
        f"1. {receipt(pair.first)}",
        f"   ({label_line(pair.first)})",
        f"2. {receipt(pair.second)}",
        f"   ({label_line(pair.second)})",
        "",
        "Tap a button, or reply first, second, both or neither.",
    ])


def question_buttons(question_id: str) -> tuple[Button, ...]:
    return tuple(Button(label, f"q:{question_id}:{answer.value}") for answer, label in _ANSWER_LABELS)


def question_message(question: Question, pair: ConflictPair) -> OutboundMessage:
    target = question.target
    return OutboundMessage(platform=target.platform, chat_id=target.chat_id, text=question_text(pair),
                           buttons=question_buttons(question.id), chat_kind=ChatKind.DM,
                           recipient_id=target.recipient_id)


def resolution_text(resolution: Resolution) -> str:
    first, second = said(resolution.first), said(resolution.second)
    if resolution.answer is Answer.FIRST:
        return f"Got it: {first} is right. I set {second} aside; it stays on record as no longer current."
    if resolution.answer is Answer.SECOND:
        return f"Got it: {second} is right. I set {first} aside; it stays on record as no longer current."
    if resolution.answer is Answer.BOTH:
        return "Got it: both are true, so I no longer treat them as a disagreement."
    return "Got it: neither is current. I set both aside; they stay on record as no longer current."


def memory_line(record: MemoryRecord, number: int | None = None, *, unreviewed: bool = False) -> str:
    """One entry of a listing, two lines: the person's words with where and when, then kith's label and id.
    ``number``: its number in /memory, which /why and /label take."""
    flags = "".join([f" ({UNREVIEWED})" if unreviewed else "", " 📌" if record.pinned else "",
                     " (disputed)" if record.conflicts_with else ""])
    head = f"{number}." if number is not None else "-"
    return f"{head} {receipt(record)}{flags}\n   {label_line(record)} ({record.kind.value}, `{record.id}`)"


def plan_line(plan: ForgetPlan, record_id: str) -> str:
    """One entry of a forget plan, as /memory lists it: the person's words first, kith's label under them."""
    record = plan.previews.get(record_id)
    if record is None:  # every id a plan shows has its record; said plainly rather than fail the whole plan
        return f"- `{record_id}`"
    return memory_line(record, unreviewed=record_id in plan.unreviewed)


def _status_line(record: MemoryRecord, *, unreviewed: bool = False) -> str:
    if unreviewed:
        return f"{UNREVIEWED} (I noted it from our chat and use it already; the nightly review decides if I keep it)"
    if record.status is Status.ACTIVE:
        return "current" + (", pinned" if record.pinned else "")
    when = f" on {record.valid_to.date().isoformat()}" if record.valid_to else ""
    return {Status.SUPERSEDED: "replaced by a correction", Status.RETIRED: "no longer current",
            Status.FORGOTTEN: "forgotten"}[record.status] + when


def why_text(records: Sequence[MemoryRecord], unreviewed: Collection[str] = ()) -> str:
    """How kith knows each record, words first: what the person said (the whole sentences, newest last), then
    kith's label, its status, and where and when. ``unreviewed``: ids of staged notes among ``records``."""
    blocks = []
    for record in records:
        verb = _VERB[record.origin]
        words = words_of(record)
        # The whole sentence the words stand in: a fragment could hide "I would never say I am vegan".
        cut = "" if words.whole else WORDS_CUT
        lines = [f"`{record.id}`"]
        lines += [f"- {verb}{cut}: “{literal(clip(sentence, QUESTION_QUOTE_CHARS))}”"
                  for sentence in words.sentences[-WHY_RECEIPTS:]] or [f"- {NO_WORDS}"]
        status = (_status_line(record, unreviewed=True) if record.id in unreviewed
                  else f"{_status_line(record)}; {record.tier.value}")
        lines += [label_line(record, starts=True), f"Status: {status}; {record.kind.value}."]
        for source in sorted(record.sources, key=lambda s: s.timestamp)[-WHY_RECEIPTS:]:
            lines.append(f"- {_where(record.scope, source.platform)}, "
                         f"{source.timestamp.strftime('%Y-%m-%d %H:%M %Z').strip()}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _link_line(name: str, link: Link) -> str:
    """One relation of a being, its words first: “the person's sentence” (kith's reading of it, where, when)."""
    words = f"“{literal(clip(link.words[-1], QUESTION_QUOTE_CHARS))}”" if link.words else NO_WORDS
    source = max(link.sources, key=lambda s: s.timestamp, default=None)
    where = f"{_where(link.scope, source.platform)}, " if source is not None else ""
    held = (f"held until {link.valid_to.date().isoformat()}" if link.valid_to is not None
            else f"since {link.valid_from.date().isoformat()}")
    return f"- you said {words} ({literal(link.reads(name))}; {where}{held})"


def who_text(being: Being) -> str:
    """``/who``: a being of the person's graph, each relation with the words that say it."""
    also = f", also {', '.join('“' + literal(n) + '”' for n in being.other_names)}" if being.other_names else ""
    kind = f" ({being.kind.value})" if being.kind else ""
    lines = [f"{literal(being.name)}{kind}{also}:"]
    lines += [_link_line(being.name, link) for link in being.links[:WHO_LINKS]]
    if len(being.links) > WHO_LINKS:
        lines.append(f"…and {len(being.links) - WHO_LINKS} more: /export has them all.")
    return "\n".join(lines)


def graph_line(found: Sequence[Being]) -> str:
    """``/memory``'s last part: who and what is in the person's life, by name, with how they relate to them."""
    if not found:
        return ""
    parts = []
    for being in found[:GRAPH_LINE_BEINGS]:
        yours_ = [link.relation for link in to_you(being)][:2]
        parts.append(literal(being.name) + (f" ({', '.join(literal(r) + ' you' for r in yours_)})" if yours_ else ""))
    more = f" and {len(found) - GRAPH_LINE_BEINGS} more" if len(found) > GRAPH_LINE_BEINGS else ""
    return f"Who and what you've told me about: {', '.join(parts)}{more}. /who <name> shows how I know."


def export_text(counts: Mapping[str, int]) -> str:
    """What the reply carrying the export file says it holds (the file's lists, counted)."""
    def n(key: str, one: str, many: str) -> str:
        return counted(counts.get(key, 0), one, many)

    return (f"Everything I keep about you is in this file: {n('memories', 'memory', 'memories')} and "
            f"{n('notes', 'note', 'notes')} not yet reviewed, with where and when you said each; "
            f"{n('goals', 'goal', 'goals')}; {n('messages', 'message', 'messages')} between us; "
            "and your accounts, questions and settings.")


def refusal_text(refused: Refused, usage: str = "") -> str:
    subject = literal(refused.subject)
    reason = refused.reason
    if reason in (RefusalReason.NOT_A_PERSON, RefusalReason.NOT_YOURS):
        if refused.subject.startswith(("m_", "n_")):
            return f"`{subject}` is not one of your memories: I only show or change what you told me."
        return "Only the person it is about can do that, from their own chat."
    if reason is RefusalReason.NOT_FOUND and refused.subject.isdigit():
        return f"/memory has no number {subject}: it numbers what I remember about you from 1."
    return {
        RefusalReason.NOT_FOUND: f"Nothing I remember about you matches “{subject}”.",
        RefusalReason.EMPTY: usage or "Tell me what, after the command.",
        RefusalReason.TOO_LONG: "That is too long to keep as one memory; say it in a sentence or two.",
        RefusalReason.PIN_LIMIT: f"You already have {subject} pinned memories: /unpin one first.",
        RefusalReason.NOTHING_PENDING: "Nothing is waiting for your confirmation (a plan lasts ten minutes); "
                                       "send /forget again.",
        RefusalReason.ALREADY_ANSWERED: "That question was already answered.",
        RefusalReason.STALE: "Those memories changed since I asked, so there is nothing left to settle.",
        RefusalReason.BLOCKED: "I could not keep that.",
        RefusalReason.INSTRUCTION: "I keep what you tell me about you and your life, not instructions for me "
                                   "or claims of authority over me.",
        RefusalReason.UNREVIEWED: f"`{subject}` is {UNREVIEWED}: the nightly review looks at it first, and may "
                                  "merge it with something you said before. Correct its label after that.",
    }.get(reason, "I could not do that.")


def parse_confirmation(text: str) -> bool | None:
    """A typed yes (True) or no (False) to a forget plan, only when that is the whole message."""
    plain = " ".join(text.casefold().split()).strip(" .!?,")
    return True if plain in _CONFIRM else False if plain in _CANCEL else None


def page_number(args: str) -> int:
    head = args.strip().split(" ", 1)[0]
    return int(head) if head.isdigit() else 1


# --- where to ask ------------------------------------------------------------------------------------
def last_dm(conn: Connection, person: str) -> DmTarget | None:
    """The DM the person wrote in last, on whichever platform."""
    m = history.messages
    row = conn.execute(sa.select(m.c.platform, m.c.chat_id, m.c.author).where(
        m.c.person == person, m.c.role == "user", m.c.chat_kind == ChatKind.DM.value)
        .order_by(m.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    # The account key is "<platform>:<platform id>"; the platform id may itself hold a colon (Slack).
    return DmTarget(row.platform, row.chat_id, row.author.partition(":")[2] or None)


def people_with_dms(conn: Connection) -> list[str]:
    m = history.messages
    rows = conn.execute(sa.select(m.c.person).where(
        m.c.person.is_not(None), m.c.role == "user", m.c.chat_kind == ChatKind.DM.value).distinct()).scalars()
    return sorted(str(p) for p in rows)


@dataclass(frozen=True, slots=True)
class Asked:
    question: Question
    message: OutboundMessage


class QuestionSender:
    """Asks people about their conflicting facts, within the caps, in their DM."""

    def __init__(self, *, db: Database, memory: MemoryService, book: QuestionBook,
                 outbound: Outbound, clock: Callable[[], datetime],
                 recheck_s: float = QUESTION_RECHECK_S, after_reply_s: float = QUESTION_AFTER_REPLY_S) -> None:
        self.db = db
        self.memory = memory
        self.book = book
        self.outbound = outbound
        self.clock = clock
        self.recheck_s = recheck_s
        self.after_reply_s = after_reply_s
        self._checked: dict[str, datetime] = {}
        self._locks = KeyedLocks()  # one question check per person at a time

    async def maybe_ask(self, person: str, *, target: DmTarget | None = None, force: bool = False,
                        send: bool = True) -> Asked | None:
        """Ask ``person`` about one flagged pair if the rules allow. ``send=False``: the caller sends it."""
        now = self.clock()
        if not force and not self._due(person, now):
            return None
        self._checked[person] = now
        async with self._locks.hold([person]):
            # Most people have no disputed facts: their memories, kept in memory, say so without a
            # read of the question book on every reply.
            pairs = askable_pairs(await self.memory.active_memories(person), now)
            if not pairs:
                return None
            state = await self.book.state_of(person)
            for question in state.open:
                if await self.book.still_open(question, self.memory.get):
                    return None
            # Every open question was void: none counts against the per-person cap any more.
            if not caps_allow(0, state.asked_in_window, self.book.limits):
                return None
            target = target or await self.db.run(last_dm, person)
            if target is None:
                return None  # never asked in a group: no DM, no question
            pair = pick_pair(pairs, state.asked_keys)
            if pair is None:
                return None
            built: list[OutboundMessage] = []
            posting = self.outbound.posting()

            def enqueue(conn: Connection, question: Question) -> None:
                built.append(question_message(question, pair))
                if send:
                    posting(conn, built[0], source=f"question:{question.id}")

            question = await self.book.reserve(person, pair, target, also=enqueue)
        if question is None:
            return None
        log.info("question asked id=%s person=%s platform=%s", question.id, person, target.platform)
        posting.schedule()
        return Asked(question, built[0])

    def _due(self, person: str, now: datetime) -> bool:
        last = self._checked.get(person)
        return last is None or (now - last).total_seconds() >= self.recheck_s

    async def sweep(self) -> int:
        """The heartbeat's pass: everyone with a DM and a flagged pair, until the hourly cap. Returns asked.

        The hourly count is read once and again only after a question went out (``reserve`` checks the caps
        in its own transaction anyway), so a tick over a thousand people costs no query per person.
        """
        asked = 0
        in_window = await self.book.asked_in_window()
        for person in await self.db.run(people_with_dms):
            if in_window >= self.book.limits.per_hour:
                break
            if await self.maybe_ask(person, force=True) is not None:
                asked += 1
                in_window = await self.book.asked_in_window()
        return asked

    async def after_reply(self, turn: CompletedTurn) -> None:
        """A TurnObserver: after a reply, maybe one question, in this DM or the person's last one."""
        message = turn.message
        target = (DmTarget(message.platform, message.chat_id, message.sender_id)
                  if message.chat_kind is ChatKind.DM else None)
        if not self._due(turn.speaker.person, self.clock()):
            return  # looked at recently: no need to wait for the reply to go out first
        try:
            await asyncio.sleep(self.after_reply_s)
            await self.maybe_ask(turn.speaker.person, target=target)
        except Exception as exc:  # a question must never disturb the conversation
            log.warning("question failed person=%s error=%s", turn.speaker.person, type(exc).__name__)


# --- the commands ------------------------------------------------------------------------------------
Handler = Callable[[InboundMessage, str], Awaitable[OutboundMessage | None]]


class MemoryCommands:
    """Chat commands and buttons over :class:`~memory.controls.person_controls.MemoryControls`."""

    def __init__(self, *, db: Database, controls: MemoryControls, sender: QuestionSender,
                 clock: Callable[[], datetime]) -> None:
        self.db = db
        self.controls = controls
        self.sender = sender
        self.clock = clock

    def register(self, commands: ChatCommands) -> None:
        for name, description, handler in (
            ("memory", "what I remember about you (/memory 2: next page)", self.memory),
            ("why", "how I know something: /why <number, words or id>", self.why),
            ("who", "who or what someone or something in your life is to me: /who <name>", self.who),
            ("remember", "keep something you say: /remember <text>", self.remember),
            ("label", "correct how I label a memory, your words unchanged: /label <number or id> <new label>",
             self.label),
            ("pin", "always keep a memory in mind: /pin <id or words>", self.pin),
            ("unpin", "stop keeping a pinned memory in mind: /unpin <id or words>", self.unpin),
            ("forget", "forget something (shows what would go first): /forget <words>", self.forget),
            ("export", "everything I keep about you, as a file", self.export),
            ("pause", "stop remembering new things", self.pause),
            ("resume", "remember new things again", self.resume),
        ):
            commands.register(name, description, self._dm_only(handler))
        commands.register_button("q", self.press_question)
        commands.register_button("f", self.press_forget)

    def _dm_only(self, handler: Handler) -> Handler:
        async def guarded(message: InboundMessage, args: str) -> OutboundMessage | None:
            if message.chat_kind is not ChatKind.DM:
                return reply_to(message, DM_ONLY)
            return await handler(message, args)

        return guarded

    async def _requester(self, message: InboundMessage) -> Requester:
        person = await self.db.run(directory.resolve, message.account, message.sender_name, self.clock())
        return Requester(person, message.account)

    async def _presser(self, press: ButtonPress) -> Requester:
        account = f"{press.platform}:{press.sender_id}"
        person = await self.db.run(directory.person_of, account)
        return Requester(person, account, own_turn=person is not None)

    # --- commands ---------------------------------------------------------------------------------
    async def memory(self, message: InboundMessage, args: str) -> OutboundMessage:
        requester = await self._requester(message)
        page = await self.controls.page(requester, page_number(args))
        paused = requester.person is not None and self.controls.is_paused(requester.person)
        note = "\n\nRemembering is paused: /resume turns it back on." if paused else ""
        if not page.total:
            return reply_to(message, "I don't remember anything about you yet. /remember <text> keeps "
                                     "something." + note)
        lines = [f"What I remember about you, your words first and my label under them (page {page.page} of "
                 f"{page.pages}, {page.total} in all):"]
        if page.notes:
            which = "One is" if page.notes == 1 else f"{page.notes} of them are"
            lines.append(f"{which} {UNREVIEWED}: noted from our chats since the nightly review, and used already.")
        lines += [memory_line(r, page.first_number + i, unreviewed=r.id in page.unreviewed)
                  for i, r in enumerate(page.items)]
        lines.append("")
        if page.page == 1 and (graph := graph_line(await self.controls.beings(requester))):
            lines += [graph, ""]
        if page.page < page.pages:
            lines.append(f"/memory {page.page + 1} shows more.")
        lines.append("/why <number> shows how I know one; /label <number> <new label> corrects my label (your "
                     "words stay); /forget <words> removes things; /export gives you all.")
        return reply_to(message, "\n".join(lines) + note)

    async def why(self, message: InboundMessage, args: str) -> OutboundMessage:
        try:
            found = await self.controls.explain(await self._requester(message), args)
        except Refused as refused:
            return reply_to(message, refusal_text(refused, "Which memory? /why <number, words or id>"))
        return reply_to(message, why_text([e.record for e in found], {e.record.id for e in found if e.unreviewed}))

    async def who(self, message: InboundMessage, args: str) -> OutboundMessage:
        requester = await self._requester(message)
        try:
            return reply_to(message, who_text(await self.controls.who(requester, args)))
        except Refused as refused:
            if refused.reason is RefusalReason.NOT_FOUND:
                names = [b.name for b in await self.controls.beings(requester)][:GRAPH_LINE_BEINGS]
                known = f" The names I know: {', '.join(literal(n) for n in names)}." if names else ""
                return reply_to(message, f"You haven't told me who or what “{literal(refused.subject)}” is.{known}")
            return reply_to(message, refusal_text(refused, "Who? /who <name>, e.g. /who my sister"))

    async def label(self, message: InboundMessage, args: str) -> OutboundMessage:
        usage = ("Which one, and what should my label say? /label <number or id> <new label>: /memory shows the "
                 "numbers. Your words stay as you said them.")
        target, _, text = args.strip().partition(" ")
        if not target or not text.strip():
            return reply_to(message, usage)
        try:
            record = await self.controls.relabel(await self._requester(message), target, text)
        except Refused as refused:
            return reply_to(message, refusal_text(refused, usage))
        return reply_to(message, f"Relabelled `{record.id}`: {label_line(record)}. Your words stay as you said "
                                 f"them: {receipt(record)}.")

    async def remember(self, message: InboundMessage, args: str) -> OutboundMessage:
        requester = await self._requester(message)
        source = Source(message.platform, message.chat_id, message.message_id, message.timestamp)
        try:
            result = await self.controls.remember(requester, args, source, Scope.DM)
        except Refused as refused:
            return reply_to(message, refusal_text(refused, "What should I remember? /remember <text>"))
        if result.outcome is Outcome.MERGED:
            return reply_to(message, f"I knew that already; I noted that you said it again (`{result.memory_id}`).")
        if result.outcome is not Outcome.CONFLICT:
            return reply_to(message, f"I'll remember that (`{result.memory_id}`).")
        assert requester.person is not None
        # Answered in this very chat: the reply itself carries the question, so it can neither be lost
        # nor arrive before the reply.
        target = DmTarget(message.platform, message.chat_id, message.sender_id)
        asked = await self.sender.maybe_ask(requester.person, target=target, force=True, send=False)
        head = f"I'll remember that (`{result.memory_id}`), but it disagrees with something you told me before."
        if asked is None:
            return reply_to(message, head + " I'll ask you which is right later.")
        return reply_to(message, f"{head}\n\n{asked.message.text}", buttons=asked.message.buttons)

    async def pin(self, message: InboundMessage, args: str) -> OutboundMessage:
        requester = await self._requester(message)
        if not args.strip():
            return reply_to(message, await self._pins_text(requester, "Pin which one? /pin <id or words>"))
        try:
            record = await self.controls.pin(requester, args)
        except Refused as refused:
            return reply_to(message, refusal_text(refused))
        return reply_to(message, f"Pinned: {literal(yours(record.text))} (`{record.id}`). I'll keep it in mind always.")

    async def unpin(self, message: InboundMessage, args: str) -> OutboundMessage:
        requester = await self._requester(message)
        if not args.strip():
            return reply_to(message, await self._pins_text(requester, "Unpin which one? /unpin <id or words>"))
        try:
            record = await self.controls.unpin(requester, args)
        except Refused as refused:
            return reply_to(message, refusal_text(refused))
        return reply_to(message, f"Unpinned: {literal(yours(record.text))} (`{record.id}`). I still remember it.")

    async def _pins_text(self, requester: Requester, usage: str) -> str:
        pins = await self.controls.pins(requester)
        if not pins:
            return f"Nothing is pinned. {usage}"
        lines = [f"Pinned ({len(pins)} of {self.controls.pinned_max}):", *(memory_line(r) for r in pins), usage]
        return "\n".join(lines)

    async def forget(self, message: InboundMessage, args: str) -> OutboundMessage:
        try:
            pending = await self.controls.plan_forget(await self._requester(message), args)
        except Refused as refused:
            return reply_to(message, refusal_text(refused, "Forget what? /forget <words>"))
        plan = pending.plan
        if plan.empty:
            return reply_to(message, f"Nothing I remember about you matches “{literal(args.strip())}”.")
        ids = [*plan.memory_ids, *plan.note_ids]
        lines = [f"If I forget “{literal(args.strip())}”:"]
        if ids:
            lines.append("These go for good:")
        lines += [plan_line(plan, item) for item in ids[:FORGET_PREVIEW_MAX]]
        if len(ids) > FORGET_PREVIEW_MAX:
            lines.append(f"…and {len(ids) - FORGET_PREVIEW_MAX} more.")
        if plan.receipt_ids:
            # The fact stays: only the sentence of theirs that held those words leaves its receipt.
            lines.append("These stay, without the sentences of yours that held those words:")
            lines += [plan_line(plan, i) for i in plan.receipt_ids[:FORGET_PREVIEW_MAX]]
        if plan.unlink:
            lines.append(f"{counted(len(plan.unlink), 'other memory disagrees', 'other memories disagree')} "
                         "with these; that link goes too.")
        if plan.places.total:
            lines.append(f"Its words go from our chats too: {describe_places(plan.places)}.")
        lines.append(f"In all: {plan.describe()}.")
        lines += ["", "Forget them? Tap a button, or reply yes or no."]
        buttons = (Button("Yes, forget them", f"f:{pending.token}:yes"), Button("Cancel", f"f:{pending.token}:no"))
        return reply_to(message, "\n".join(lines), buttons=buttons)

    async def export(self, message: InboundMessage, _args: str) -> OutboundMessage:
        recent = self.controls.memory.forgetter.recent
        with recent.watching() as mark:
            requester = await self._requester(message)
            file = await self.controls.export(requester)
            data: bytes | None = file.data
            counts = file.counts
            # A forget of theirs that landed while the file was being put together: its words leave the file
            # too, and the reply counts what the file then holds.
            for eraser in recent.since(mark, requester.person or ""):
                if data is not None:
                    data = erase_json(data, eraser)
        if data is None:  # cannot happen to a JSON export; an empty ".json" would be worse than none
            return reply_to(message, "I could not put your file together just now; send /export again.")
        if data is not file.data:
            document = json.loads(data)
            counts = {k: len(v) for k, v in document.items() if isinstance(v, list)} if isinstance(
                document, dict) else counts
        return reply_to(message, export_text(counts), attachment_name=file.name, attachment_bytes=data)

    async def pause(self, message: InboundMessage, _args: str) -> OutboundMessage:
        await self.controls.pause(await self._requester(message))
        return reply_to(message, "Paused: I won't remember anything new from our chats until you send "
                                 "/resume. What I already remember stays (/memory).")

    async def resume(self, message: InboundMessage, _args: str) -> OutboundMessage:
        await self.controls.resume(await self._requester(message))
        return reply_to(message, "Remembering again.")

    # --- answers: buttons and their typed twins -------------------------------------------------------
    async def answer_if_pending(self, message: InboundMessage) -> OutboundMessage | None:
        """Call before the conversation: a typed answer to the person's open question or forget plan."""
        if message.chat_kind is not ChatKind.DM:
            return None
        answer = parse_answer(message.text)
        confirm = parse_confirmation(message.text) if answer is None else None
        if answer is None and confirm is None:
            return None
        person = await self.db.run(directory.person_of, message.account)
        if person is None:
            return None
        requester = Requester(person, message.account)
        if answer is not None:
            question = await self.controls.open_question(requester)
            if question is None:
                return None
            return reply_to(message, await self._answer(requester, question.id, answer))
        if self.controls.pending_forget(person) is None:
            finished = self._finished_after_restart(person, message.timestamp) if confirm else None
            return None if finished is None else reply_to(message, finished)
        return reply_to(message, await self._confirm(requester, None, bool(confirm), message.timestamp))

    def _finished_after_restart(self, person: str | None, said_at: datetime | None) -> str | None:
        """What a forget confirmed just before kith was stopped, and finished by its next start, removed: the
        person's yes (said before that forget began, or a press of its button) is answered with it once, though
        the plan it answered is gone."""
        result = self.controls.memory.forgetter.answer_owed(person or "", said_at)
        if result is None:
            return None
        return (f"Forgotten (I was restarted while doing it, and finished it when I came back): {result.describe()}."
                " They won't come back from old messages; if you tell me again later, I'll hear it again.")

    async def press_question(self, press: ButtonPress, rest: str) -> OutboundMessage | None:
        question_id, _, value = rest.rpartition(":")
        try:
            answer = Answer(value)
        except ValueError:
            return None
        text = await self._answer(await self._presser(press), question_id, answer)
        return self._to_presser(press, text)

    async def press_forget(self, press: ButtonPress, rest: str) -> OutboundMessage | None:
        token, _, value = rest.rpartition(":")
        if value not in ("yes", "no"):
            return None
        text = await self._confirm(await self._presser(press), token, value == "yes")
        return self._to_presser(press, text)

    async def _answer(self, requester: Requester, question_id: str, answer: Answer) -> str:
        try:
            return resolution_text(await self.controls.answer(requester, question_id, answer))
        except Refused as refused:
            log.info("question answer refused id=%s reason=%s", question_id, refused.reason.value)
            return refusal_text(refused)

    async def _confirm(self, requester: Requester, token: str | None, yes: bool,
                       said_at: datetime | None = None) -> str:
        try:
            if not yes:
                self.controls.cancel_forget(requester, token)
                return "Cancelled: I forgot nothing."
            result = await self.controls.confirm_forget(requester, token)
        except Refused as refused:
            log.info("forget confirmation refused reason=%s", refused.reason.value)
            finished = self._finished_after_restart(requester.person, said_at) if yes else None
            return finished or refusal_text(refused)
        except JournalUnwritable as unwritable:
            return (f"I couldn't forget that: {unwritable.disk}, so I could not safely begin. Nothing was removed;"
                    " send /forget again once that is fixed.")
        return (f"Forgotten: {result.describe()}. They won't come back from old messages; if you tell me again "
                "later, I'll hear it again.")

    @staticmethod
    def _to_presser(press: ButtonPress, text: str) -> OutboundMessage:
        return OutboundMessage(platform=press.platform, chat_id=press.chat_id, text=text, chat_kind=press.chat_kind,
                               recipient_id=press.sender_id)


__all__ = [
    "DM_ONLY",
    "Asked",
    "MemoryCommands",
    "QuestionSender",
    "export_text",
    "last_dm",
    "literal",
    "parse_confirmation",
    "question_text",
    "receipt",
]
