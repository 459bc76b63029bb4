"""The policy gate intake asks: access rules, pairing and the rate limit, persisted.

Decisions come from the pure functions in ``policy.rules`` and ``policy.ratelimit``; this
class only loads and stores the state they need and logs each decision with ids only.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from ground.db import Connection, Database
from ground.tunables import SHARED_CACHE_TRUST_S
from ground.types import ButtonPress, ChatKind, InboundMessage, OutboundMessage
from people import directory
from policy import store
from policy.pairing import AccessState, Chooser
from policy.ratelimit import RateLimiter
from policy.rules import Decision, Reason, Verdict, decide_inbound, dm_allowed, may_send
from policy.settings import DmPolicy, PlatformPolicy, PolicySettings
from policy.store import ACCESS_TOPIC

log = logging.getLogger("kith.policy")


def _as_approved(access: AccessState, account: str) -> AccessState:
    """``access`` as if ``account`` were approved, never written: policy follows the person."""
    return replace(access, approved=access.approved | {account})


def _sibling_accounts(conn: Connection, account: str) -> list[str]:
    """The other accounts of the person behind ``account`` (linked with /link or bot.py people link)."""
    person = directory.person_of(conn, account)
    if person is None:
        return []
    return [a.account for a in directory.accounts_of(conn, person) if a.account != account]


def effective_policy(settings: PolicySettings, platform: str, configured: set[str]) -> PlatformPolicy:
    """The terminal is the operator at the keyboard: its DMs are open unless configured otherwise."""
    policy = settings.for_platform(platform)
    if platform == "console" and platform not in configured:
        return replace(policy, dm=DmPolicy.OPEN)
    return policy


class PolicyGate:
    def __init__(self, db: Database, settings: PolicySettings, *, configured: set[str] | None = None,
                 clock: Callable[[], datetime],
                 monotonic: Callable[[], float] = time.monotonic, rng: Chooser = secrets.choice) -> None:
        self.db = db
        self.settings = settings
        self.configured = configured or set()
        self.clock = clock
        self._limiters: dict[str, RateLimiter] = {}  # each platform's own, from its settings
        self.monotonic = monotonic
        self.rng = rng
        # The access state as of the database version it was read at: every send checks against the current
        # one (a revoke from `bot.py pairing` takes effect at once), read again only when something else wrote.
        self._access: AccessState | None = None
        self._access_version: object | None = None
        self._policies: dict[str, PlatformPolicy] = {}

    def policy_for(self, platform: str) -> PlatformPolicy:
        policy = self._policies.get(platform)
        if policy is None:  # settings never change while running: work each platform's out once
            policy = self._policies[platform] = effective_policy(self.settings, platform, self.configured)
        return policy

    def takes_dms(self, platform: str) -> bool:
        """Whether DMs on ``platform`` are anything but disabled (a stranger may still have to pair)."""
        return self.policy_for(platform).dm is not DmPolicy.DISABLED

    access_topic = ACCESS_TOPIC  # the database topic whose version says the access state changed

    def decide_within(self, conn: Connection, message: InboundMessage) -> tuple[Decision, AccessState]:
        """The access decision on ``message`` inside the caller's transaction (pairing codes are written
        there), and the access state it leaves; pass both to :meth:`remember` once it committed.

        Policy follows the person: a sender refused on their own is let through when another account of
        theirs may talk to kith, without writing that into the owner's list (nor the refusal's pairing code).
        """
        policy = self.policy_for(message.platform)
        now = self.clock()

        def decide(access: AccessState) -> tuple[tuple[Decision, AccessState], AccessState]:
            decision, new_state = decide_inbound(message, policy, access, now, rng=self.rng)
            # Linked accounts are read only for a sender refused on their own.
            if decision.allowed or access.is_approved(message.account) or not self._linked_to_trusted(
                    conn, message.account, access):
                return (decision, new_state), new_state
            decision, _ = decide_inbound(message, policy, _as_approved(access, message.account), now, rng=self.rng)
            return (decision, access), access

        return store.update(conn, decide)

    def rate_limit(self, message: InboundMessage, decision: Decision) -> Decision:
        """The decision once the sender's rate limit had its say (in memory: after the access decision
        committed), logged with ids only."""
        if decision.allowed:
            policy = self.policy_for(message.platform)
            rate = self._limiter_for(message.platform, policy).check(message.account, self.monotonic())
            if not rate.allowed:
                decision = rate.decision()
        log.info("policy platform=%s chat=%s sender=%s verdict=%s reason=%s", message.platform, message.chat_id,
                 message.sender_id, decision.verdict.value, decision.reason.value)
        return decision

    async def check_inbound(self, message: InboundMessage) -> Decision:
        """Decide on ``message`` in a transaction of its own, then apply the rate limit."""
        version, (decision, access) = await self.db.run_versioned(
            ACCESS_TOPIC, functools.partial(self.decide_within, message=message), short=True)
        self.remember(access, version)
        return self.rate_limit(message, decision)

    def _limiter_for(self, platform: str, policy: PlatformPolicy) -> RateLimiter:
        limiter = self._limiters.get(platform)
        if limiter is None:
            limiter = self._limiters[platform] = RateLimiter(policy.rate_limit_burst, policy.rate_limit_per_minute)
        return limiter

    def _linked_to_trusted(self, conn: Connection, account: str, access: AccessState) -> bool:
        """Whether another account of the same person may talk to kith on its own: policy follows the person."""
        return any(self._trusted(a, access) for a in _sibling_accounts(conn, account))

    def _trusted(self, account: str, access: AccessState) -> bool:
        """Whether ``account`` may talk to kith in a DM on its own platform without pairing anew."""
        platform, _, sender = account.partition(":")
        return dm_allowed(self.policy_for(platform), access, platform, sender)

    async def refresh(self) -> None:
        """Reload the access state (at start)."""
        version, (access, _) = await self.db.run_versioned(ACCESS_TOPIC, store.load)
        self.remember(access, version)

    def remember(self, access: AccessState, version: object | None) -> None:
        """``access`` as read (or written) at database ``version``."""
        self._access = access
        self._access_version = version

    async def _current_access(self) -> AccessState:
        version = self.db.version(ACCESS_TOPIC, max_age_s=SHARED_CACHE_TRUST_S)
        if self._access is None or version is None or version != self._access_version:
            version, (access, _) = await self.db.run_versioned(ACCESS_TOPIC, store.load, short=True)
            self.remember(access, version)
        assert self._access is not None
        return self._access

    async def may_send(self, message: OutboundMessage) -> bool:
        """The outbound gate the delivery worker calls for every message, against the current access state."""
        if message.notice:
            return True  # inbound policy itself decided to answer this sender with a notice
        decision = await self._chat_allowed(message.platform, message.chat_id, message.chat_kind,
                                            message.recipient_id)
        if decision.verdict is not Verdict.ALLOW:
            log.warning("policy refused send platform=%s chat=%s reason=%s", message.platform, message.chat_id,
                        decision.reason.value)
        return decision.allowed

    async def may_press(self, press: ButtonPress) -> bool:
        """Whether a button press may act: its presser may still use kith where it was pressed.

        An old button outlives access: a revoked account, a DM policy now disabled or a group no longer
        allowed must not answer a question or confirm a forget through it.
        """
        decision = await self._chat_allowed(press.platform, press.chat_id, press.chat_kind, press.sender_id)
        if decision.verdict is not Verdict.ALLOW:
            log.info("policy refused press platform=%s chat=%s sender=%s reason=%s", press.platform, press.chat_id,
                     press.sender_id, decision.reason.value)
        return decision.allowed

    async def _chat_allowed(self, platform: str, chat_id: str, chat_kind: ChatKind,
                            recipient_id: str | None) -> Decision:
        access = await self._current_access()
        recipient = f"{platform}:{recipient_id or chat_id}"
        policy = self.policy_for(platform)
        decision = may_send(platform, chat_id, chat_kind, policy, access, recipient_id=recipient_id)
        if decision.reason is Reason.SEND_DM_NOT_ALLOWED and chat_kind is ChatKind.DM:
            # Policy follows the person, as inbound: a DM to an account linked to one allowed on its own.
            if await self.db.run_short(self._linked_to_trusted, recipient, access):
                decision = may_send(platform, chat_id, chat_kind, policy, _as_approved(access, recipient),
                                    recipient_id=recipient_id)
        return decision
