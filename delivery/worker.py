"""Delivers outbox entries: strictly in order within a chat, concurrently across chats.

One asyncio task per lane (platform, chat, thread) that has work; it ends when the lane is idle.
A slow or rate-limited chat therefore waits in its own task and never holds up another. Progress
is committed right after every platform answer, so a restart resumes exactly where the last
process stopped; the only duplicates are the chunk the platform accepted in the instant before
that commit, and a chunk whose send timed out after it left (``SendError.maybe_delivered``): it
is sent again, logged as ``delivery maybe doubled`` and noted in ``outbox_doubts``.

A transient failure is never the end. One that names its wait (a 429's ``retry_after``) is tried
again after exactly that, however often it comes: the platform's word, kept in the outbox across a
restart. One that names none (a 5xx, a dropped connection) is a guess: after ``max_attempts`` quick
retries the reply keeps its place at the head of its chat with a long backoff (``SEND_LONG_BACKOFF_*``)
until it is delivered or ``SEND_MAX_LATE_H`` old. A lane whose head is due that far off on a guess
leaves its task ("parked"); the sweep takes it up when due. A guess ends early: a start, or the first
success on that platform after a guessed failure, makes it due now. Only a refusal (blocked, chat not
found, forbidden) ends a reply at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

from delivery import outbox, previews
from delivery.outbox import Lane, OutboxEntry
from delivery.posting import Posting
from delivery.previews import PreviewKey
from delivery.rate_gate import RateGate
from ground.config import DeliverySettings
from ground.db import Connection, Database
from ground.failures import describe, traceback_of
from ground.tunables import (
    DELIVERY_LANE_ENDS_KEPT,
    DELIVERY_PARK_AFTER_S,
    FAILED_LANE_RETRY_S,
    SEND_LONG_BACKOFF_BASE_S,
    SEND_LONG_BACKOFF_MAX_S,
    SEND_MAX_LATE_H,
    SEND_RETRY_AFTER_MARGIN_S,
)
from ground.types import Channel, ChatKind, OutboundMessage, RenderedChunk, SendError, SentMessage, utcnow

log = logging.getLogger("kith.delivery")

POLICY_REFUSED = "policy"
# error_code of a platform's "retry after N s": the entry's next_attempt_at is then the platform's own due time,
# kept across restarts. (An older kith wrote "SendError:rate_limited" with a wait it had grown: a start releases it.)
RETRY_AFTER = "SendError:retry_after"
RENDER_FAILED = "render"
EXPIRED = "expired"  # last_error of a reply still undelivered SEND_MAX_LATE_H after it was queued
MAYBE_DELIVERED = "SendError:maybe_delivered"


def retry_delay(failures: int, retry_after: float | None, *, quick: int, base_s: float, max_s: float,
                rng: Callable[[], float]) -> float:
    """Seconds to wait before trying a chunk again after a failed send.

    ``retry_after``: the wait the platform named for this failure. It is waited exactly (and a fixed hair,
    ``SEND_RETRY_AFTER_MARGIN_S``), however many failures came before: sending earlier only earns another
    429, and later keeps the person waiting on a platform that is back. ``failures``: the failures so far
    that named no wait, the only ones that grow the guess: ``quick`` quick retries, then the long backoff.
    """
    if retry_after is not None:
        return max(retry_after, 0.0) + SEND_RETRY_AFTER_MARGIN_S
    if failures < quick:
        return backoff_delay(failures, base_s=base_s, max_s=max_s, rng=rng)
    return long_backoff_delay(failures - quick + 1, rng=rng)


def backoff_delay(attempt: int, *, base_s: float, max_s: float, rng: Callable[[], float]) -> float:
    """Seconds to wait before quick retry number ``attempt`` (1-based): full jitter."""
    ceiling = min(max_s, base_s * 2 ** (attempt - 1))
    return rng() * ceiling


def long_backoff_delay(step: int, *, rng: Callable[[], float], base_s: float = SEND_LONG_BACKOFF_BASE_S,
                       max_s: float = SEND_LONG_BACKOFF_MAX_S) -> float:
    """Seconds to wait before long retry number ``step`` (1-based), once the quick ones are spent.

    Spread over the upper half of the range: after an outage the chats must not all retry together,
    nor any of them straight away.
    """
    ceiling = min(max_s, base_s * 2 ** (step - 1))
    return ceiling * (0.5 + 0.5 * rng())


def error_code(exc: BaseException) -> str:
    """A short label for ``last_error``: the error's class and the platform's code, never its text."""
    if isinstance(exc, SendError):
        if exc.bad_formatting:
            return "SendError:bad_formatting"
        if exc.permanent:
            return "SendError:permanent"
        if exc.maybe_delivered:
            return MAYBE_DELIVERED
        return RETRY_AFTER if exc.retry_after is not None else "SendError:transient"
    return type(exc).__name__


@runtime_checkable
class LooksBeforeResend(Protocol):
    """A channel that can look for a chunk it may have posted (Slack: by a marker in the message's metadata)
    before sending it again, given what an earlier process knew: that chunk ``index`` went out unanswered,
    no earlier than ``since``."""

    def may_have_posted(self, message: OutboundMessage, index: int, since: datetime) -> None: ...


@runtime_checkable
class ReplacesPreviews(Protocol):
    """A channel whose reply previews are messages (Discord, Slack): a reply's first chunk edits its preview
    message into itself, so the person sees one message (:mod:`delivery.previews`)."""

    def previews(self, chat_kind: ChatKind) -> bool: ...

    async def replace_chunk(self, message: OutboundMessage, chunk: RenderedChunk, message_id: str, *,
                            plain: bool = False) -> SentMessage: ...


class _LostPlace(Exception):
    def __init__(self, entry_id: int, index: int) -> None:
        super().__init__(f"entry {entry_id} chunk {index}")
        self.entry_id = entry_id
        self.index = index


class _LeftForNextStart(Exception):
    """A send failed while the worker drains for shutdown: the lane stops, its work stays pending."""


class _Parked(Exception):
    """The lane's head is not due for a long while: the lane task ends, the sweep takes it up when due."""


class DeliveryWorker:
    def __init__(self, db: Database, channels: Mapping[str, Channel],
                 may_send: Callable[[OutboundMessage], Awaitable[bool]], *, settings: DeliverySettings | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 clock: Callable[[], datetime] = utcnow, rng: Callable[[], float] = random.random,
                 lane_ends_kept: int = DELIVERY_LANE_ENDS_KEPT, gate: RateGate | None = None) -> None:
        self.db = db
        # Each chat's rate gate, shared with the reply previews: a 429 either gets closes the chat for both.
        self.gate = gate or RateGate(clock=lambda: self._clock().timestamp())
        # Entries whose first chunk edited a preview message: its row goes once that chunk is recorded.
        self._replaced: dict[int, PreviewKey] = {}
        self.channels = channels
        self.may_send = may_send
        self.settings = settings or DeliverySettings()
        self._sleep = sleep
        self._clock = clock
        self._rng = rng
        self._lanes: dict[Lane, asyncio.Task[None]] = {}
        # Lanes that got new work while their task was running; the task looks again before it ends.
        self._dirty: set[Lane] = set()
        self._stopped = False
        self._draining = False  # shutting down: deliver what goes out now, leave the rest pending
        # Lane tasks ended so far, and when each lane's task last ended (as a value of that count): a
        # head read before its lane's task ended may be stale. Lanes whose end was forgotten to bound
        # the memory count as ended when it was (``_ends_forgotten``), which only costs a read.
        self._ended = 0
        self._lane_ended: dict[Lane, int] = {}
        self._ends_forgotten = 0
        self._lane_ends_kept = lane_ends_kept
        self._sweeper: asyncio.Task[None] | None = None
        # Lanes whose task failed unexpectedly (a row that will not decode, a database error), and when: the
        # sweep tries them again only after FAILED_LANE_RETRY_S, not every interval with a traceback each time.
        self._failed_at: dict[Lane, datetime] = {}
        # Lanes whose task is waiting out a backoff right now, each with the event that ends its wait early:
        # shutdown ends those at once (their retry time is in the outbox), rather than waiting for them or
        # for its own deadline, and a platform that answers again ends a guessed wait.
        self._resting: dict[Lane, asyncio.Event] = {}
        # Platforms with a failure that named no wait since their last success: the next success there
        # shows the guess wrong, and wakes the chats waiting on it.
        self._troubled: set[str] = set()
        # Entries a success woke: each once in a process, so a chat whose own sends keep failing while the
        # others go through follows its own backoff rather than being woken by every success after it.
        self._woken: set[int] = set()
        self._wakes: set[asyncio.Task[None]] = set()
        # When this process's delivery started: entries older than that were left by an earlier process.
        self._started_at: datetime | None = None
        self._lanes_looked_at: set[Lane] = set()  # lanes whose first such entry was looked for

    def now(self) -> datetime:
        return self._clock()

    def lane_ends(self) -> int:
        """A mark for ``lane_ended_since``; safe to take on the database thread."""
        return self._ended

    def lane_ended_since(self, lane: Lane, mark: int) -> bool:
        return self._lane_ended.get(lane, self._ends_forgotten) > mark

    async def start(self) -> int:
        """Resume every lane a previous process left with pending entries. Returns how many lanes."""
        self._stopped = False
        self._draining = False
        if self._started_at is None:
            self._started_at = self._clock()

        def resume(conn: Connection) -> list[Lane]:
            outbox.release_backoffs(conn, keep_errors=(RETRY_AFTER,), now=self._clock())
            return outbox.pending_lanes(conn)

        lanes = await self.db.run(resume)
        for lane in lanes:
            self.schedule(lane)
        if lanes:
            log.info("delivery resumed lanes=%d", len(lanes))
        if self.settings.outbox_sweep_s > 0 and self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_every(self.settings.outbox_sweep_s),
                                                                   name="deliver:sweep")
        return len(lanes)

    async def sweep(self) -> int:
        """Take up pending work that no lane task holds: entries another process wrote (``bot.py heartbeat``
        while the bot runs). Returns how many lanes it started."""
        if self._draining:  # shutting down: what drain left pending is the next start's
            return 0
        pending = await self.db.run(outbox.pending_lanes, due_by=self._clock())
        if self._draining:  # it may have begun during the read
            return 0
        retry_before = self._clock() - timedelta(seconds=FAILED_LANE_RETRY_S)
        idle = [lane for lane in pending
                if lane[0] in self.channels and self._failed_at.get(lane, retry_before) <= retry_before
                and (lane not in self._lanes or self._lanes[lane].done())]
        for lane in idle:
            self.schedule(lane)
        if idle:
            log.info("delivery took up lanes queued elsewhere lanes=%d", len(idle))
        return len(idle)

    async def _sweep_every(self, interval_s: float) -> None:
        while not self._stopped:
            await asyncio.sleep(interval_s)  # wall-clock by nature: it waits for other processes
            try:
                await self.sweep()
            except Exception as exc:  # the next sweep tries again; delivery itself is unaffected
                log.warning("delivery sweep failed error=%s", describe(exc))

    async def post(self, message: OutboundMessage, *, source: str | None = None,
                   also: Callable[[Connection], None] | None = None) -> int:
        """Write the message to the outbox, then schedule it. Once this returns, it survives a crash.

        ``also`` runs in the same transaction (e.g. the inbox forgetting the message this answers).
        """
        posting = self.posting(source=source, also=also)
        entry_id = await self.db.run_short(posting, message)
        posting.schedule()
        return entry_id

    def posting(self, *, source: str | None = None, also: Callable[[Connection], None] | None = None) -> Posting:
        """A posting for another transaction (``posting(conn, message)``, then ``also(conn)``); ``schedule`` it
        once that transaction is over."""
        return Posting(self, source=source, also=also)

    def schedule(self, lane: Lane, *, head: OutboxEntry | None = None) -> None:
        """Make sure the lane has a task; for entries enqueued elsewhere, e.g. inside another transaction.

        ``head``: the lane's oldest pending entry, read just now; a new task starts with it, saving a read.
        """
        if self._stopped:
            return
        if lane[0] not in self.channels:
            # Stays pending: a later process that has this channel will deliver it.
            log.warning("delivery waiting for channel platform=%s chat=%s", lane[0], lane[1])
            return
        self._dirty.add(lane)
        task = self._lanes.get(lane)
        if task is None or task.done():
            self._lanes[lane] = asyncio.get_running_loop().create_task(
                self._run_lane(lane, head), name=f"deliver:{lane[0]}:{lane[1]}")

    async def wait_idle(self) -> None:
        """Wait until every lane has run out of deliverable work (tests, shutdown)."""
        while self._lanes:
            await asyncio.gather(*list(self._lanes.values()), return_exceptions=True)

    async def drain(self) -> None:
        """At shutdown: deliver what the platforms take now; a failing send is left pending for the next
        start, never marked failed for an outage that merely overlapped the shutdown."""
        self._draining = True
        for lane in list(self._resting):
            task = self._lanes.get(lane)
            if task is not None:
                task.cancel()
        await self.wait_idle()

    async def stop(self) -> None:
        """Cancel every lane task; their progress is already in the outbox for the next start."""
        self._stopped = True
        sweeper, self._sweeper = self._sweeper, None
        tasks = list(self._lanes.values()) + list(self._wakes) + ([sweeper] if sweeper is not None else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lanes.clear()
        self._dirty.clear()

    async def _run_lane(self, lane: Lane, head: OutboxEntry | None = None) -> None:
        known = head is not None  # whether ``head`` is the lane's current head, read after the last change
        try:
            while True:
                self._dirty.discard(lane)
                entry = head if known else await self.db.run_short(outbox.next_in_lane, lane)
                if entry is None:
                    if lane in self._dirty:
                        known = False
                        continue
                    self._failed_at.pop(lane, None)
                    return
                await self._wait_until_due(entry)
                known, head = await self._deliver(entry)
        except asyncio.CancelledError:
            raise
        except _LeftForNextStart:
            return  # shutting down: the lane's work stays pending, in order, for the next start
        except _Parked:
            return  # pending, in order, with its retry time: the sweep takes the lane up when that comes
        except _LostPlace as lost:
            log.warning("delivery lost its place id=%d chunk=%d; lane left to its other sender", lost.entry_id,
                        lost.index)
        except Exception as exc:
            # The entry stays pending; the next submit to this lane or the next start retries it.
            self._failed_at[lane] = self._clock()
            log.error("delivery lane failed platform=%s chat=%s error=%s", lane[0], lane[1],
                      describe(exc), exc_info=traceback_of(exc))
        finally:
            self._ended += 1
            if len(self._lane_ended) >= self._lane_ends_kept:
                self._lane_ended.clear()
                self._ends_forgotten = self._ended
            self._lane_ended[lane] = self._ended
            if self._lanes.get(lane) is asyncio.current_task():
                del self._lanes[lane]

    async def _wait_until_due(self, entry: OutboxEntry) -> None:
        if entry.next_attempt_at is None:
            return
        delay = (entry.next_attempt_at - self._clock()).total_seconds()
        if delay > 0:
            await self._rest(entry.lane, delay, named=entry.last_error == RETRY_AFTER)

    async def _rest(self, lane: Lane, delay: float, *, named: bool) -> None:
        """Wait out a backoff, or end the lane task when another will take the lane up in time.

        ``named``: the platform named this wait. Its chat waits in its own task, however long, so it goes
        when the platform said, not at the sweep after; a guessed wait far off is parked.
        """
        if self._draining:
            raise _LeftForNextStart
        if delay > DELIVERY_PARK_AFTER_S and self.settings.outbox_sweep_s > 0 and not named:
            raise _Parked
        woken = self._resting[lane] = asyncio.Event()
        sleeping = asyncio.ensure_future(self._sleep(delay))
        waking = asyncio.ensure_future(woken.wait())
        try:
            await asyncio.wait((sleeping, waking), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeping.cancel()
            waking.cancel()
            if self._resting.get(lane) is woken:
                del self._resting[lane]

    def _too_late(self, entry: OutboxEntry, now: datetime) -> bool:
        return now - entry.created_at >= timedelta(hours=SEND_MAX_LATE_H)

    async def _expire(self, entry: OutboxEntry, now: datetime, *, error: str | None) -> None:
        await self.db.run(outbox.mark_failed, entry.id, error=EXPIRED, now=now)
        log.error("delivery expired id=%d platform=%s chat=%s age_h=%.1f last_error=%s", entry.id,
                  entry.message.platform, entry.message.chat_id, (now - entry.created_at).total_seconds() / 3600,
                  error or entry.last_error)

    def _maybe_in_flight_at_a_crash(self, entry: OutboxEntry) -> bool:
        """Whether ``entry``'s next chunk may have been on its way when an earlier process died.

        A process killed mid-send notes no doubt, and the platform may have posted the chunk it had sent. A lane
        delivers one chunk at a time, in order, so only the first entry this process delivers in a lane an
        earlier process left can be that one: it is looked for once (one lookup a lane at a start)."""
        lane = outbox.lane_of(entry.message)
        if self._started_at is None or entry.created_at >= self._started_at or lane in self._lanes_looked_at:
            return False
        self._lanes_looked_at.add(lane)
        return True

    async def _deliver(self, entry: OutboxEntry) -> tuple[bool, OutboxEntry | None]:
        """Deliver or fail ``entry``; returns (True, the lane's next entry) when that was read on the way."""
        message = entry.message
        if self._too_late(entry, self._clock()):  # a process that was down for a day finds it so
            await self._expire(entry, self._clock(), error=None)
            return False, None
        if not await self.may_send(message):
            await self.db.run(outbox.mark_failed, entry.id, error=POLICY_REFUSED, now=self._clock())
            log.warning("delivery refused by policy id=%d platform=%s chat=%s", entry.id, message.platform,
                        message.chat_id)
            return False, None
        channel = self.channels[message.platform]
        try:
            chunks = list(channel.render(message))
        except Exception as exc:
            await self.db.run(outbox.mark_failed, entry.id, error=f"{RENDER_FAILED}:{type(exc).__name__}",
                              now=self._clock())
            log.error("delivery render failed id=%d platform=%s error=%s", entry.id, message.platform,
                      type(exc).__name__)
            return False, None
        attempts = entry.attempts
        sent_ids = list(entry.sent_ids)
        following: tuple[bool, OutboxEntry | None] = (False, None)
        if entry.chunks_sent >= len(chunks):  # every chunk went out before a restart: only the status is left
            await self.db.run_short(outbox.mark_sent, entry.id, now=self._clock())
        elif isinstance(channel, LooksBeforeResend):
            if self._maybe_in_flight_at_a_crash(entry):
                channel.may_have_posted(message, entry.chunks_sent, entry.created_at)
            elif entry.last_error is not None:
                # Read only for an entry that failed before: a doubt another process noted about its next chunk.
                if (entry.id, entry.chunks_sent) in await self.db.run(outbox.doubts, entry.id):
                    channel.may_have_posted(message, entry.chunks_sent, entry.created_at)
        for index in range(entry.chunks_sent, len(chunks)):
            sent = await self._send_with_retries(entry, channel, chunks[index], index, len(chunks), attempts)
            if sent is None:
                return False, None
            sent_ids.append(sent.platform_message_id)
            replaced = self._replaced.pop(entry.id, None) if index == 0 else None
            if index == len(chunks) - 1:
                # The last chunk: sent, recorded and the lane's next entry read in one transaction.
                recorded, head = await self.db.run_short(outbox.record_final_chunk, entry.id, index,
                                                         tuple(sent_ids), entry.lane, now=self._clock())
                following = (recorded, head)
            elif not await self.db.run_short(outbox.record_chunk, entry.id, index, tuple(sent_ids), now=self._clock()):
                # Someone else recorded this chunk (another process delivering the lane) or the entry is no
                # longer pending: its progress is not ours to continue, and the lane's order says nothing
                # after it may go first. The lane ends here; its next submit or the next start reads it again.
                raise _LostPlace(entry.id, index)
            if replaced is not None:
                # Only now: killed before the chunk was recorded, the next start edits the same message again.
                await self.db.run_short(previews.let_go, replaced)
            attempts = 0
        log.info("delivered id=%d platform=%s chat=%s chunks=%d resumed_from=%d", entry.id, message.platform,
                 message.chat_id, len(chunks), entry.chunks_sent)
        return following

    async def _send_with_retries(self, entry: OutboxEntry, channel: Channel, chunk: RenderedChunk,
                                 index: int, total: int, attempts: int) -> SentMessage | None:
        """Send one chunk until it is delivered, or the entry is marked failed (``None``).

        ``attempts`` counts the chunk's failed sends so far (kept in the outbox); a send that may have
        been posted (its answer never came) is not one of them: it is no refusal.
        """
        message = entry.message
        uncertain = 0  # sends of this chunk that timed out after leaving, in this process
        while True:
            try:
                sent = await self._send_chunk(entry, channel, chunk, index)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                code = error_code(exc)
                permanent = isinstance(exc, SendError) and exc.permanent
                doubted = isinstance(exc, SendError) and exc.maybe_delivered and not permanent
                now = self._clock()
                if doubted:
                    uncertain += 1
                    log.warning("delivery maybe doubled id=%d chunk=%d/%d platform=%s chat=%s", entry.id,
                                index + 1, total, message.platform, message.chat_id)
                retry_after = exc.retry_after if isinstance(exc, SendError) else None
                if retry_after is None and not permanent:
                    self._troubled.add(message.platform)  # a guess, which the platform's next success ends
                if not doubted and retry_after is None:
                    attempts += 1  # a named wait is the platform's word: it grows no backoff
                doubt = index if doubted else None
                if permanent:
                    await self.db.run(outbox.mark_failed, entry.id, error=code, now=now, attempts=attempts)
                    log.warning("delivery refused id=%d platform=%s chat=%s chunk=%d/%d error=%s", entry.id,
                                message.platform, message.chat_id, index + 1, total, code)
                    return None
                if self._draining:
                    await self.db.run(outbox.schedule_retry, entry.id, attempts=attempts, next_attempt_at=now,
                                      error=code, now=now, doubted_chunk=doubt)
                    log.warning("delivery left for the next start id=%d platform=%s chunk=%d/%d error=%s",
                                entry.id, message.platform, index + 1, total, code)
                    raise _LeftForNextStart from None
                if self._too_late(entry, now):
                    if doubt is not None:
                        await self.db.run(outbox.schedule_retry, entry.id, attempts=attempts, next_attempt_at=now,
                                          error=code, now=now, doubted_chunk=doubt)
                    await self._expire(entry, now, error=code)
                    return None
                delay = retry_delay(attempts + uncertain, retry_after, quick=self.settings.max_attempts,
                                    base_s=self.settings.backoff_base_s, max_s=self.settings.backoff_max_s,
                                    rng=self._rng)
                await self.db.run(outbox.schedule_retry, entry.id, attempts=attempts,
                                  next_attempt_at=now + timedelta(seconds=delay), error=code, now=now,
                                  doubted_chunk=doubt)
                log.warning("delivery retry id=%d platform=%s chunk=%d/%d attempt=%d delay_s=%.2f error=%s",
                            entry.id, message.platform, index + 1, total, attempts, delay, code)
                await self._rest(entry.lane, delay, named=retry_after is not None)
                continue
            if message.platform in self._troubled:
                self._troubled.discard(message.platform)
                self._wake_guessed(message.platform, but=entry.id)
            return sent

    async def _replace_preview(self, entry: OutboxEntry, channel: Channel, chunk: RenderedChunk,
                               index: int) -> SentMessage | None:
        """The reply's first chunk edited into the preview message that stands for it, if one does; None
        otherwise, and when that message is gone (deleted, or no longer editable): then it is posted afresh.

        Looked for only where a preview can have been posted (a platform that streams, in a chat it previews in):
        a reply in a group, or on a platform not streaming, costs no read."""
        message = entry.message
        if (index != 0 or entry.source is None or not isinstance(channel, ReplacesPreviews)
                or message.platform not in self.settings.stream or not channel.previews(message.chat_kind)):
            return None
        key = PreviewKey(entry.message.platform, entry.message.chat_id, entry.source)
        message_id = await self.db.run_short(previews.noted, key)
        if message_id is None:
            return None
        try:
            try:
                sent = await channel.replace_chunk(entry.message, chunk, message_id)
            except SendError as exc:
                if not exc.bad_formatting:
                    raise
                sent = await channel.replace_chunk(entry.message, chunk, message_id, plain=True)
        except SendError as exc:
            if not exc.permanent:
                raise  # waited and tried again as any send is
            await self.db.run_short(previews.let_go, key)
            log.info("delivery preview gone id=%d platform=%s error=%s: posted afresh", entry.id,
                     entry.message.platform, error_code(exc))
            return None
        self._replaced[entry.id] = key
        return sent

    def _wake_guessed(self, platform: str, *, but: int) -> None:
        """The platform answered again after a failure that named no wait: the chats waiting on a guess
        there go now (in a task of its own, so this chunk's progress is committed without waiting for it)."""
        task = asyncio.get_running_loop().create_task(self._wake(platform, but=but), name=f"deliver:wake:{platform}")
        self._wakes.add(task)
        task.add_done_callback(self._wakes.discard)

    async def _wake(self, platform: str, *, but: int) -> None:
        skip = frozenset(self._woken | {but})
        try:
            woken = await self.db.run(outbox.release_guessed, platform=platform, keep_errors=(RETRY_AFTER,),
                                      skip=skip, now=self._clock())
        except Exception as exc:  # their own backoff still ends, and the sweep takes them up
            log.warning("delivery wake failed platform=%s error=%s", platform, describe(exc))
            return
        if len(self._woken) >= self._lane_ends_kept:
            self._woken.clear()  # bounded: forgetting costs at most one more early try each
        for entry_id, lane in woken:
            self._woken.add(entry_id)
            resting = self._resting.get(lane)
            if resting is not None:
                resting.set()  # its task goes on at once; it already holds the head
            else:
                self.schedule(lane)
        if woken:
            log.info("delivery woke chats waiting on a guess platform=%s chats=%d", platform, len(woken))

    async def _send_chunk(self, entry: OutboxEntry, channel: Channel, chunk: RenderedChunk,
                          index: int) -> SentMessage:
        message = entry.message
        wait = self.gate.wait_s(message.platform, message.chat_id)
        if wait > 0:  # a preview of this chat was told to wait: the reply waits too, once, rather than earn more
            await self._sleep(wait)
        try:
            return await self._send_or_replace(entry, channel, chunk, index)
        except SendError as exc:
            if exc.retry_after is not None:
                self.gate.refused(message.platform, message.chat_id, exc.retry_after)
            raise

    async def _send_or_replace(self, entry: OutboxEntry, channel: Channel, chunk: RenderedChunk,
                               index: int) -> SentMessage:
        replaced = await self._replace_preview(entry, channel, chunk, index)
        if replaced is not None:
            return replaced
        try:
            return await channel.send_chunk(entry.message, chunk, index, plain=False)
        except SendError as exc:
            if not exc.bad_formatting:
                raise
        # The platform rejected our markup: the same words without formatting beat no words at all.
        log.info("delivery plain fallback id=%d platform=%s chunk=%d", entry.id, entry.message.platform,
                 index + 1)
        return await channel.send_chunk(entry.message, chunk, index, plain=True)
