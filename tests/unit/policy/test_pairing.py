"""Pairing end to end, in pure form: codes issued, repeated, capped, expired, approved and revoked."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from ground.tunables import PAIRING_CODE_LENGTH, PAIRING_CODE_TTL_S, PAIRING_MAX_PENDING, PAIRING_REMINDER_INTERVAL_S
from ground.types import ChatKind, InboundMessage
from policy.pairing import (
    PAIRING_ALPHABET,
    PAIRING_FULL_NOTICE,
    AccessState,
    PairingError,
    approve,
    issue_code,
    list_pending,
    new_code,
    revoke,
)
from policy.rules import Decision, Reason, Verdict, decide_inbound, may_send
from policy.settings import PlatformPolicy

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
POLICY = PlatformPolicy()  # pairing is the default DM policy


def dm(sender_id: str, platform: str = "telegram") -> InboundMessage:
    return InboundMessage(
        platform=platform, bot_account="bot", chat_id=sender_id, chat_kind=ChatKind.DM, sender_id=sender_id,
        sender_name="someone", text="hi there", message_id=f"m-{sender_id}",
    )


class Gateway:
    """Threads the access state through decisions the way the message loop will."""

    def __init__(self, access: AccessState | None = None, seed: int = 1) -> None:
        self.access = access or AccessState()
        self.rng = random.Random(seed)

    def receive(self, sender_id: str, now: datetime, platform: str = "telegram") -> Decision:
        msg = dm(sender_id, platform)
        decision, self.access = decide_inbound(msg, POLICY, self.access, now, rng=self.rng.choice)
        return decision


def test_codes_use_the_unambiguous_alphabet_and_length() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200  # drawn at random, not repeated
    for code in codes:
        assert len(code) == PAIRING_CODE_LENGTH
        assert set(code) <= set(PAIRING_ALPHABET)
    assert not set("0O1I") & set("".join(codes))


def test_unknown_sender_gets_a_code_then_the_same_code_only_after_a_quiet_interval() -> None:
    gw = Gateway()
    first = gw.receive("42", T0)
    assert first.verdict is Verdict.PAIRING_CODE and first.reason == Reason.DM_PAIRING_ISSUED
    assert first.code is not None and first.code in (first.notice or "")

    again = gw.receive("42", T0 + timedelta(seconds=5))
    assert again == Decision(Verdict.DROP, Reason.DM_PAIRING_PENDING)

    later = T0 + timedelta(seconds=PAIRING_REMINDER_INTERVAL_S)
    reminder = gw.receive("42", later)
    assert reminder.verdict is Verdict.PAIRING_CODE and reminder.reason == Reason.DM_PAIRING_REMINDER
    assert reminder.code == first.code
    assert gw.receive("42", later + timedelta(seconds=1)).verdict is Verdict.DROP
    assert len(gw.access.pending) == 1


def test_issue_code_is_idempotent_for_a_pending_account() -> None:
    rng = random.Random(3).choice
    code, access = issue_code(AccessState(), "telegram", "telegram:42", T0, rng)
    again, access2 = issue_code(access, "telegram", "telegram:42", T0 + timedelta(minutes=5), rng)
    assert again == code and access2 is access


def test_at_most_three_pending_and_the_fourth_is_told_politely_once() -> None:
    gw = Gateway()
    codes = [gw.receive(str(n), T0).code for n in range(PAIRING_MAX_PENDING)]
    assert len(set(codes)) == PAIRING_MAX_PENDING

    full = gw.receive("99", T0 + timedelta(seconds=1))
    assert full == Decision(Verdict.NOTICE, Reason.DM_PAIRING_FULL, notice=PAIRING_FULL_NOTICE)
    assert full.code is None
    repeat = gw.receive("99", T0 + timedelta(seconds=2))
    assert repeat == Decision(Verdict.DROP, Reason.DM_PAIRING_FULL_NOTIFIED)
    assert gw.receive("99", T0 + timedelta(minutes=30)).verdict is Verdict.DROP
    assert len(gw.access.pending) == PAIRING_MAX_PENDING


def test_the_cap_is_per_platform() -> None:
    gw = Gateway()
    for n in range(PAIRING_MAX_PENDING):
        gw.receive(str(n), T0)
    assert gw.receive("99", T0, platform="discord").verdict is Verdict.PAIRING_CODE


def test_a_freed_slot_lets_the_refused_sender_pair() -> None:
    gw = Gateway()
    codes = [gw.receive(str(n), T0).code for n in range(PAIRING_MAX_PENDING)]
    assert gw.receive("99", T0).verdict is Verdict.NOTICE
    gw.access, _ = approve(gw.access, codes[0] or "", T0 + timedelta(minutes=1))
    assert gw.receive("99", T0 + timedelta(minutes=2)).verdict is Verdict.PAIRING_CODE


def test_codes_expire_after_an_hour() -> None:
    gw = Gateway()
    code = gw.receive("42", T0).code or ""
    expiry = T0 + timedelta(seconds=PAIRING_CODE_TTL_S)
    assert [p.code for p in list_pending(gw.access, expiry - timedelta(seconds=1))] == [code]
    assert list_pending(gw.access, expiry) == ()
    with pytest.raises(PairingError) as excinfo:
        approve(gw.access, code, expiry)
    assert excinfo.value.reason == "pairing.code_expired"


def test_an_expired_code_is_replaced_by_a_new_one_and_frees_its_slot() -> None:
    gw = Gateway()
    old = [gw.receive(str(n), T0).code for n in range(PAIRING_MAX_PENDING)]
    after = T0 + timedelta(seconds=PAIRING_CODE_TTL_S)
    fresh = gw.receive("0", after)
    assert fresh.reason == Reason.DM_PAIRING_ISSUED and fresh.code != old[0]
    assert gw.receive("99", after).verdict is Verdict.PAIRING_CODE
    assert len(gw.access.pending) == 2  # the other expired codes are gone from the state


def test_approval_ignores_case_spaces_and_dashes_then_the_sender_is_allowed() -> None:
    gw = Gateway()
    code = gw.receive("42", T0).code or ""
    typed = f" {code[:4].lower()}-{code[4:].lower()} "
    gw.access, request = approve(gw.access, typed, T0 + timedelta(minutes=5))
    assert request.account == "telegram:42"
    assert gw.access.pending == ()
    assert gw.receive("42", T0 + timedelta(minutes=6)) == Decision(Verdict.ALLOW, Reason.DM_APPROVED)
    assert may_send("telegram", "42", ChatKind.DM, POLICY, gw.access).allowed


def test_a_wrong_code_is_refused_and_changes_nothing() -> None:
    gw = Gateway()
    code = gw.receive("42", T0).code or ""
    wrong = ("A" if code[0] != "A" else "B") + code[1:]
    before = gw.access
    with pytest.raises(PairingError) as excinfo:
        approve(gw.access, wrong, T0)
    assert excinfo.value.reason == "pairing.code_unknown"
    assert gw.access is before and gw.receive("42", T0 + timedelta(seconds=1)).verdict is Verdict.DROP


def test_first_approved_can_become_owner_but_not_a_second() -> None:
    gw = Gateway()
    first = gw.receive("42", T0).code or ""
    second = gw.receive("43", T0).code or ""
    gw.access, _ = approve(gw.access, first, T0, make_owner=True)
    assert gw.access.owner == "telegram:42"
    with pytest.raises(PairingError) as excinfo:
        approve(gw.access, second, T0, make_owner=True)
    assert excinfo.value.reason == "pairing.owner_exists"
    gw.access, _ = approve(gw.access, second, T0)
    assert gw.access.owner == "telegram:42"
    assert gw.receive("42", T0) == Decision(Verdict.ALLOW, Reason.DM_OWNER)
    assert gw.receive("43", T0) == Decision(Verdict.ALLOW, Reason.DM_APPROVED)


def test_revoke_shuts_the_door_again() -> None:
    gw = Gateway()
    code = gw.receive("42", T0).code or ""
    gw.access, _ = approve(gw.access, code, T0, make_owner=True)
    gw.access = revoke(gw.access, "telegram:42")
    assert gw.access.owner is None and not gw.access.is_approved("telegram:42")
    assert not may_send("telegram", "42", ChatKind.DM, POLICY, gw.access).allowed
    again = gw.receive("42", T0 + timedelta(minutes=1))
    assert again.verdict is Verdict.PAIRING_CODE and again.code != code


def test_revoke_cancels_a_pending_request_and_refuses_unknown_accounts() -> None:
    gw = Gateway()
    gw.receive("42", T0)
    gw.access = revoke(gw.access, "telegram:42")
    assert gw.access.pending == ()
    with pytest.raises(PairingError) as excinfo:
        revoke(gw.access, "telegram:42")
    assert excinfo.value.reason == "pairing.unknown_account"


def test_issue_code_refuses_an_approved_account_and_a_full_platform() -> None:
    approved = AccessState(approved=frozenset({"telegram:1"}))
    with pytest.raises(PairingError, match="already approved"):
        issue_code(approved, "telegram", "telegram:1", T0)
    access = AccessState()
    for n in range(PAIRING_MAX_PENDING):
        _, access = issue_code(access, "telegram", f"telegram:{n}", T0)
    with pytest.raises(PairingError) as excinfo:
        issue_code(access, "telegram", "telegram:99", T0)
    assert excinfo.value.reason == "pairing.full"


def test_the_full_notice_is_repeated_only_after_a_code_lifetime() -> None:
    gw = Gateway()
    for n in range(PAIRING_MAX_PENDING):
        gw.receive(str(n), T0)
    assert gw.receive("99", T0).verdict is Verdict.NOTICE
    # Keep the platform full with fresh requests while the first ones expire.
    later = T0 + timedelta(seconds=PAIRING_CODE_TTL_S)
    for n in range(10, 10 + PAIRING_MAX_PENDING):
        gw.receive(str(n), later)
    assert gw.receive("99", later).verdict is Verdict.NOTICE
    assert gw.receive("99", later + timedelta(seconds=1)).verdict is Verdict.DROP
