"""Pairing codes and the access state they feed: who is approved, who is the owner, who is waiting.

An unknown sender under ``dm = "pairing"`` gets a short code and nothing else; the owner approves it with
the CLI. Rules, decided here so every caller gets the same ones:

- A code is :data:`~ground.tunables.PAIRING_CODE_LENGTH` characters from an alphabet without the look-alikes
  0/O and 1/I, drawn with :mod:`secrets`, valid for :data:`~ground.tunables.PAIRING_CODE_TTL_S` seconds and
  compared case-insensitively (spaces and dashes ignored). Expired codes are refused.
- At most :data:`~ground.tunables.PAIRING_MAX_PENDING` unexpired codes wait per platform.
- A sender who already holds a code keeps the same code. It is sent again at most once per
  :data:`~ground.tunables.PAIRING_REMINDER_INTERVAL_S` (someone who lost the message can get it back, a flood
  gets silence); every other message of theirs is dropped unanswered.
- While the platform is full, a new unknown sender is told so once; the notice is remembered for a code's
  lifetime, after which a still-full platform may tell them once more.
- The first approved account may be made the owner; once there is an owner, nobody else can become it by
  approval. Revoking the owner's account clears the owner.

Every function returns a new :class:`AccessState` (the very same object when nothing changed, so a caller
can skip writing it) and raises :class:`PairingError` with a machine-readable ``reason`` when refused.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from ground.tunables import (
    PAIRING_CODE_LENGTH,
    PAIRING_CODE_TTL_S,
    PAIRING_MAX_PENDING,
)

PAIRING_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, no 1/I

PAIRING_PROMPT = (
    "Hi! I only chat with people my owner has approved. Your pairing code is {code}. "
    "Please pass it to my owner; it is valid for {minutes} minutes."
)
PAIRING_FULL_NOTICE = "Hi! I can't take new pairing requests right now. Please try again later."

Chooser = Callable[[str], str]
"""Picks one character of the alphabet; :func:`secrets.choice` in production, injectable for tests."""

_MAX_DRAWS = 16  # a repeat among a handful of 40-bit codes means a broken chooser, not bad luck


class PairingError(Exception):
    """A pairing operation was refused; ``reason`` is machine-readable (``pairing.code_expired``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PendingCode:
    code: str
    platform: str
    account: str  # "telegram:123", as InboundMessage.account
    issued_at: datetime
    sent_at: datetime  # the last time the code was sent to the account

    @property
    def expires_at(self) -> datetime:
        return self.issued_at + timedelta(seconds=PAIRING_CODE_TTL_S)

    def is_expired(self, now: datetime) -> bool:
        return now >= self.expires_at


@dataclass(frozen=True)
class AccessState:
    approved: frozenset[str] = frozenset()  # account keys
    owner: str | None = None  # an account key; the owner passes every DM policy but "disabled"
    pending: tuple[PendingCode, ...] = ()
    full_notified: Mapping[str, datetime] = field(default_factory=lambda: MappingProxyType({}))

    def is_approved(self, account: str) -> bool:
        return account == self.owner or account in self.approved

    def pending_for(self, account: str) -> PendingCode | None:
        return next((p for p in self.pending if p.account == account), None)

    def pending_count(self, platform: str, now: datetime) -> int:
        return sum(1 for p in self.pending if p.platform == platform and not p.is_expired(now))


def pairing_prompt(code: str) -> str:
    return PAIRING_PROMPT.format(code=code, minutes=PAIRING_CODE_TTL_S // 60)


def new_code(rng: Chooser = secrets.choice) -> str:
    return "".join(rng(PAIRING_ALPHABET) for _ in range(PAIRING_CODE_LENGTH))


def normalize_code(text: str) -> str:
    return "".join(ch for ch in text if not ch.isspace() and ch != "-").upper()


def prune(access: AccessState, now: datetime) -> AccessState:
    """Forget expired codes and "pairing is full" notices older than a code's lifetime."""
    pending = tuple(p for p in access.pending if not p.is_expired(now))
    ttl = timedelta(seconds=PAIRING_CODE_TTL_S)
    notified = {a: at for a, at in access.full_notified.items() if now < at + ttl}
    if len(pending) == len(access.pending) and len(notified) == len(access.full_notified):
        return access
    return replace(access, pending=pending, full_notified=MappingProxyType(notified))


def list_pending(access: AccessState, now: datetime) -> tuple[PendingCode, ...]:
    """The unexpired codes, oldest first: what ``bot.py pairing list`` shows."""
    return tuple(sorted((p for p in access.pending if not p.is_expired(now)), key=lambda p: p.issued_at))


def issue_code(
    access: AccessState, platform: str, account: str, now: datetime, rng: Chooser = secrets.choice
) -> tuple[PendingCode, AccessState]:
    """The account's unexpired code if it has one, else a new one; refused when the platform is full."""
    if not account.startswith(f"{platform}:"):
        raise ValueError(f"account {account!r} does not belong to platform {platform!r}")
    if access.is_approved(account):
        raise PairingError("pairing.already_approved", "this account is already approved")
    state = prune(access, now)
    existing = state.pending_for(account)
    if existing is not None:
        return existing, state
    if state.pending_count(platform, now) >= PAIRING_MAX_PENDING:
        raise PairingError("pairing.full", f"{PAIRING_MAX_PENDING} codes are already pending on {platform}")
    taken = {p.code for p in state.pending}
    for _ in range(_MAX_DRAWS):
        code = new_code(rng)
        if code not in taken:
            break
    else:
        raise RuntimeError("the code chooser keeps repeating pending codes")
    issued = PendingCode(code=code, platform=platform, account=account, issued_at=now, sent_at=now)
    notified = {a: at for a, at in state.full_notified.items() if a != account}
    return issued, replace(state, pending=(*state.pending, issued), full_notified=MappingProxyType(notified))


def mark_sent(access: AccessState, account: str, now: datetime) -> AccessState:
    """Record that the account's pending code was just sent to it again."""
    return replace(
        access, pending=tuple(replace(p, sent_at=now) if p.account == account else p for p in access.pending)
    )


def mark_full_notified(access: AccessState, account: str, now: datetime) -> AccessState:
    return replace(access, full_notified=MappingProxyType({**access.full_notified, account: now}))


def approve(
    access: AccessState, code: str, now: datetime, *, make_owner: bool = False
) -> tuple[AccessState, PendingCode]:
    """Approve the account holding ``code``; returns the new state and the approved request."""
    wanted = normalize_code(code)
    match = next(
        (p for p in access.pending if secrets.compare_digest(p.code.encode(), wanted.encode())), None
    )
    if match is None:
        raise PairingError("pairing.code_unknown", "no pending request has this code")
    if match.is_expired(now):
        raise PairingError("pairing.code_expired", "this code has expired; the sender must write again")
    if make_owner and access.owner is not None and access.owner != match.account:
        raise PairingError("pairing.owner_exists", "there is already an owner")
    notified = {a: at for a, at in access.full_notified.items() if a != match.account}
    state = replace(
        access,
        approved=access.approved | {match.account},
        owner=match.account if make_owner else access.owner,
        pending=tuple(p for p in access.pending if p is not match),
        full_notified=MappingProxyType(notified),
    )
    return state, match


def revoke(access: AccessState, account: str) -> AccessState:
    """Withdraw an account's approval, ownership and any pending code."""
    pending = tuple(p for p in access.pending if p.account != account)
    if account not in access.approved and account != access.owner and len(pending) == len(access.pending):
        raise PairingError("pairing.unknown_account", "this account is neither approved nor pending")
    return replace(
        access,
        approved=access.approved - {account},
        owner=None if access.owner == account else access.owner,
        pending=pending,
    )
