"""The verdicts: may this inbound message reach the core, and may the core send into this chat?

Each :class:`Decision` carries a machine-readable :class:`Reason`, so a caller logs ``reason`` with ids
and never the text. Only ``PAIRING_CODE`` and ``NOTICE`` verdicts are answered, with exactly
``Decision.notice``; those replies are this module's own decision, so they are not put through
:func:`may_send` (which would refuse a DM to the very stranger being handed a code).
"""

from __future__ import annotations

import enum
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ground.tunables import PAIRING_MAX_PENDING, PAIRING_REMINDER_INTERVAL_S
from ground.types import ChatKind, InboundMessage
from policy.pairing import (
    PAIRING_FULL_NOTICE,
    AccessState,
    Chooser,
    issue_code,
    mark_full_notified,
    mark_sent,
    pairing_prompt,
    prune,
)
from policy.settings import DmPolicy, GroupPolicy, GroupRule, PlatformPolicy


class Verdict(enum.StrEnum):
    ALLOW = "allow"  # hand the message to the core / send it
    DROP = "drop"  # ignore silently
    PAIRING_CODE = "pairing_code"  # reply with Decision.notice (which holds the code) and nothing else
    NOTICE = "notice"  # reply once with Decision.notice and nothing else


class Reason(enum.StrEnum):
    DM_DISABLED = "dm.disabled"
    DM_OWNER = "dm.owner"
    DM_ALLOW_FROM = "dm.allow_from"
    DM_APPROVED = "dm.approved"
    DM_OPEN = "dm.open"
    DM_NOT_ALLOWED = "dm.not_allowed"  # allowlist mode, unknown sender
    DM_PAIRING_ISSUED = "dm.pairing.issued"
    DM_PAIRING_REMINDER = "dm.pairing.reminder"  # the same pending code, sent again
    DM_PAIRING_PENDING = "dm.pairing.pending"
    DM_PAIRING_FULL = "dm.pairing.full"
    DM_PAIRING_FULL_NOTIFIED = "dm.pairing.full_notified"  # already told it is full
    GROUP_DISABLED = "group.disabled"
    GROUP_NOT_ALLOWED = "group.not_allowed"
    GROUP_NOT_MENTIONED = "group.not_mentioned"
    GROUP_MENTIONED = "group.mentioned"  # @-mention or a reply to the bot
    GROUP_MENTION_PATTERN = "group.mention_pattern"
    GROUP_MENTION_NOT_REQUIRED = "group.mention_not_required"
    SEND_DM_DISABLED = "send.dm.disabled"
    SEND_DM_NOT_ALLOWED = "send.dm.not_allowed"
    SEND_DM_ALLOWED = "send.dm.allowed"
    SEND_GROUP_DISABLED = "send.group.disabled"
    SEND_GROUP_NOT_ALLOWED = "send.group.not_allowed"
    SEND_GROUP_ALLOWED = "send.group.allowed"
    RATE_OK = "rate.ok"
    RATE_LIMITED = "rate.limited"
    RATE_LIMITED_NOTIFIED = "rate.limited.notified"  # refused again in the same streak, silently


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: Reason
    # Kept out of repr so logging a Decision never leaks a pairing code or reply text.
    code: str | None = field(default=None, repr=False)
    notice: str | None = field(default=None, repr=False)

    @property
    def allowed(self) -> bool:
        return self.verdict is Verdict.ALLOW


def decide_inbound(
    msg: InboundMessage,
    policy: PlatformPolicy,
    access: AccessState,
    now: datetime,
    *,
    rng: Chooser = secrets.choice,
) -> tuple[Decision, AccessState]:
    """The verdict on one inbound message, and the access state after it (pairing may change it)."""
    if msg.chat_kind is ChatKind.GROUP:
        return _decide_group(msg, policy), access
    return _decide_dm(msg, policy, access, now, rng)


def may_send(
    platform: str,
    chat_id: str,
    chat_kind: ChatKind,
    policy: PlatformPolicy,
    access: AccessState,
    *,
    recipient_id: str | None = None,
) -> Decision:
    """Whether the core may send into a chat: the same gate as inbound, so nothing reaches a refused chat.

    For a DM, ``recipient_id`` is the person's platform-scoped id; it defaults to ``chat_id``, which is
    right on Telegram. On Discord and Slack a DM channel id is not a user id, so without ``recipient_id``
    the check fails closed.
    """
    if chat_kind is ChatKind.GROUP:
        if policy.group is GroupPolicy.DISABLED:
            return Decision(Verdict.DROP, Reason.SEND_GROUP_DISABLED)
        if policy.group is GroupPolicy.ALLOWLIST and chat_id not in policy.allow_groups:
            return Decision(Verdict.DROP, Reason.SEND_GROUP_NOT_ALLOWED)
        return Decision(Verdict.ALLOW, Reason.SEND_GROUP_ALLOWED)
    if policy.dm is DmPolicy.DISABLED:
        return Decision(Verdict.DROP, Reason.SEND_DM_DISABLED)
    if dm_allowed(policy, access, platform, recipient_id if recipient_id is not None else chat_id):
        return Decision(Verdict.ALLOW, Reason.SEND_DM_ALLOWED)
    return Decision(Verdict.DROP, Reason.SEND_DM_NOT_ALLOWED)


def dm_allowed(policy: PlatformPolicy, access: AccessState, platform: str, sender_id: str) -> bool:
    """Whether this sender may talk to kith in a DM on ``platform`` without pairing anew."""
    if policy.dm is DmPolicy.DISABLED:
        return False
    return policy.dm is DmPolicy.OPEN or _known_sender(policy, access, platform, sender_id) is not None


def matches_mention_pattern(rule: GroupRule, text: str) -> bool:
    return any(re.search(pattern, text, re.IGNORECASE) for pattern in rule.mention_patterns)


def _known_sender(
    policy: PlatformPolicy, access: AccessState, platform: str, sender_id: str
) -> Reason | None:
    account = f"{platform}:{sender_id}"
    if account == access.owner:
        return Reason.DM_OWNER
    if sender_id in policy.allow_from:
        return Reason.DM_ALLOW_FROM
    if account in access.approved:
        return Reason.DM_APPROVED
    return None


def _decide_dm(
    msg: InboundMessage, policy: PlatformPolicy, access: AccessState, now: datetime, rng: Chooser
) -> tuple[Decision, AccessState]:
    if policy.dm is DmPolicy.DISABLED:
        return Decision(Verdict.DROP, Reason.DM_DISABLED), access
    known = _known_sender(policy, access, msg.platform, msg.sender_id)
    if known is not None:
        return Decision(Verdict.ALLOW, known), access
    if policy.dm is DmPolicy.OPEN:
        return Decision(Verdict.ALLOW, Reason.DM_OPEN), access
    if policy.dm is DmPolicy.ALLOWLIST:
        return Decision(Verdict.DROP, Reason.DM_NOT_ALLOWED), access
    return _decide_pairing(msg.platform, msg.account, access, now, rng)


def _decide_pairing(
    platform: str, account: str, access: AccessState, now: datetime, rng: Chooser
) -> tuple[Decision, AccessState]:
    state = prune(access, now)
    pending = state.pending_for(account)
    if pending is not None:
        if now - pending.sent_at < timedelta(seconds=PAIRING_REMINDER_INTERVAL_S):
            return Decision(Verdict.DROP, Reason.DM_PAIRING_PENDING), state
        return _code_reply(Reason.DM_PAIRING_REMINDER, pending.code), mark_sent(state, account, now)
    if state.pending_count(platform, now) >= PAIRING_MAX_PENDING:
        if account in state.full_notified:
            return Decision(Verdict.DROP, Reason.DM_PAIRING_FULL_NOTIFIED), state
        full = Decision(Verdict.NOTICE, Reason.DM_PAIRING_FULL, notice=PAIRING_FULL_NOTICE)
        return full, mark_full_notified(state, account, now)
    issued, state = issue_code(state, platform, account, now, rng)
    return _code_reply(Reason.DM_PAIRING_ISSUED, issued.code), state


def _code_reply(reason: Reason, code: str) -> Decision:
    return Decision(Verdict.PAIRING_CODE, reason, code=code, notice=pairing_prompt(code))


def _decide_group(msg: InboundMessage, policy: PlatformPolicy) -> Decision:
    if policy.group is GroupPolicy.DISABLED:
        return Decision(Verdict.DROP, Reason.GROUP_DISABLED)
    if policy.group is GroupPolicy.ALLOWLIST and msg.chat_id not in policy.allow_groups:
        return Decision(Verdict.DROP, Reason.GROUP_NOT_ALLOWED)
    rule = policy.rule_for(msg.chat_id)
    if not rule.require_mention:
        return Decision(Verdict.ALLOW, Reason.GROUP_MENTION_NOT_REQUIRED)
    # Channels set `mentioned` for an @-mention and for a reply to one of the bot's own messages.
    if msg.mentioned:
        return Decision(Verdict.ALLOW, Reason.GROUP_MENTIONED)
    if matches_mention_pattern(rule, msg.text):
        return Decision(Verdict.ALLOW, Reason.GROUP_MENTION_PATTERN)
    return Decision(Verdict.DROP, Reason.GROUP_NOT_MENTIONED)
