"""Who gets through: DM and group policy, outbound sends, and the [policy] config."""

from __future__ import annotations

import random
import tomllib
from datetime import UTC, datetime

import pytest

from ground.types import ChatKind, InboundMessage
from kith.settings import PLATFORMS
from policy.pairing import AccessState
from policy.rules import Decision, Reason, Verdict, decide_inbound, dm_allowed, may_send
from policy.settings import (
    DmPolicy,
    GroupPolicy,
    GroupRule,
    PlatformPolicy,
    PolicyConfigError,
    PolicySettings,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
FRIEND = "111"  # listed in allow_from
PAIRED = "222"  # approved through pairing
OWNER = "333"
STRANGER = "999"
GROUP = "-100500"


def dm(sender_id: str, text: str = "hello", platform: str = "telegram") -> InboundMessage:
    return InboundMessage(
        platform=platform, bot_account="bot", chat_id=sender_id, chat_kind=ChatKind.DM, sender_id=sender_id,
        sender_name="someone", text=text, message_id="m1", timestamp=NOW,
    )


def group_msg(
    text: str = "hello all", *, chat_id: str = GROUP, mentioned: bool = False, reply_to: str | None = None
) -> InboundMessage:
    return InboundMessage(
        platform="telegram", bot_account="bot", chat_id=chat_id, chat_kind=ChatKind.GROUP, sender_id=STRANGER,
        sender_name="someone", text=text, message_id="m2", mentioned=mentioned, reply_to_message_id=reply_to,
        timestamp=NOW,
    )


def policy(dm_policy: DmPolicy = DmPolicy.PAIRING, **overrides: object) -> PlatformPolicy:
    base: dict[str, object] = {"dm": dm_policy, "allow_from": frozenset({FRIEND})}
    base.update(overrides)
    return PlatformPolicy(**base)  # type: ignore[arg-type]


ACCESS = AccessState(approved=frozenset({f"telegram:{PAIRED}"}), owner=f"telegram:{OWNER}")


def decide(msg: InboundMessage, pol: PlatformPolicy, access: AccessState = ACCESS) -> Decision:
    decision, _ = decide_inbound(msg, pol, access, NOW, rng=random.Random(7).choice)
    return decision


# --- DM policy × sender ---------------------------------------------------------------------------

KNOWN = [(FRIEND, Reason.DM_ALLOW_FROM), (PAIRED, Reason.DM_APPROVED), (OWNER, Reason.DM_OWNER)]


@pytest.mark.parametrize("mode", [DmPolicy.PAIRING, DmPolicy.ALLOWLIST, DmPolicy.OPEN])
@pytest.mark.parametrize(("sender", "reason"), KNOWN)
def test_known_senders_pass_every_dm_policy_but_disabled(mode: DmPolicy, sender: str, reason: Reason) -> None:
    decision = decide(dm(sender), policy(mode))
    assert decision.verdict is Verdict.ALLOW
    assert decision.reason == reason


@pytest.mark.parametrize("sender", [FRIEND, PAIRED, OWNER, STRANGER])
def test_disabled_dms_drop_everyone_silently(sender: str) -> None:
    decision = decide(dm(sender), policy(DmPolicy.DISABLED))
    assert decision == Decision(Verdict.DROP, Reason.DM_DISABLED)
    assert decision.notice is None


def test_open_dms_let_a_stranger_in() -> None:
    assert decide(dm(STRANGER), policy(DmPolicy.OPEN)) == Decision(Verdict.ALLOW, Reason.DM_OPEN)


def test_allowlist_drops_a_stranger_without_a_code_or_reply() -> None:
    decision, access = decide_inbound(dm(STRANGER), policy(DmPolicy.ALLOWLIST), ACCESS, NOW)
    assert decision == Decision(Verdict.DROP, Reason.DM_NOT_ALLOWED)
    assert access.pending == ()


def test_pairing_answers_a_stranger_with_a_code_only() -> None:
    decision, access = decide_inbound(dm(STRANGER), policy(), ACCESS, NOW, rng=random.Random(7).choice)
    assert decision.verdict is Verdict.PAIRING_CODE
    assert decision.reason == Reason.DM_PAIRING_ISSUED
    assert decision.code is not None and decision.notice is not None
    assert decision.code in decision.notice
    assert [p.account for p in access.pending] == [f"telegram:{STRANGER}"]


def test_allow_from_is_per_platform() -> None:
    # The same numeric id on another platform is another person.
    decision = decide(dm(FRIEND, platform="discord"), policy(DmPolicy.ALLOWLIST, allow_from=frozenset()))
    assert decision.verdict is Verdict.DROP


def test_approved_account_does_not_leak_across_platforms() -> None:
    decision = decide(dm(PAIRED, platform="discord"), policy(DmPolicy.ALLOWLIST, allow_from=frozenset()))
    assert decision == Decision(Verdict.DROP, Reason.DM_NOT_ALLOWED)


def test_decision_repr_hides_code_and_text() -> None:
    decision = decide(dm(STRANGER), policy())
    assert decision.code is not None
    assert decision.code not in repr(decision)
    assert "dm.pairing.issued" in repr(decision)


# --- Groups --------------------------------------------------------------------------------------

def test_group_allowlist_drops_an_unlisted_group_even_when_mentioned() -> None:
    pol = policy(group=GroupPolicy.ALLOWLIST, allow_groups=frozenset({"-1"}))
    assert decide(group_msg(mentioned=True), pol) == Decision(Verdict.DROP, Reason.GROUP_NOT_ALLOWED)


def test_group_allowlist_admits_a_listed_group_when_mentioned() -> None:
    pol = policy(group=GroupPolicy.ALLOWLIST, allow_groups=frozenset({GROUP}))
    assert decide(group_msg(mentioned=True), pol) == Decision(Verdict.ALLOW, Reason.GROUP_MENTIONED)


def test_default_group_policy_is_allowlist_with_nothing_listed() -> None:
    assert decide(group_msg(mentioned=True), PlatformPolicy()).reason == Reason.GROUP_NOT_ALLOWED


def test_open_groups_admit_any_group_when_mentioned() -> None:
    assert decide(group_msg(mentioned=True), policy(group=GroupPolicy.OPEN)).verdict is Verdict.ALLOW


def test_disabled_groups_drop_even_a_mention_in_a_listed_group() -> None:
    pol = policy(group=GroupPolicy.DISABLED, allow_groups=frozenset({GROUP}))
    assert decide(group_msg(mentioned=True), pol) == Decision(Verdict.DROP, Reason.GROUP_DISABLED)


def test_group_message_without_mention_is_dropped() -> None:
    pol = policy(group=GroupPolicy.OPEN)
    assert decide(group_msg("what a day"), pol) == Decision(Verdict.DROP, Reason.GROUP_NOT_MENTIONED)


def test_reply_to_the_bot_counts_as_mention_but_a_reply_to_someone_else_does_not() -> None:
    pol = policy(group=GroupPolicy.OPEN)
    # Channels set `mentioned` when the replied-to message is the bot's own.
    assert decide(group_msg("sure", reply_to="bot-msg", mentioned=True), pol).verdict is Verdict.ALLOW
    assert decide(group_msg("sure", reply_to="alice-msg"), pol).verdict is Verdict.DROP


def test_mention_pattern_counts_as_a_mention_case_insensitively() -> None:
    rule = GroupRule(mention_patterns=(r"^kith\b",))
    pol = policy(group=GroupPolicy.OPEN, default_group_rule=rule)
    called = decide(group_msg("KITH, what's the time?"), pol)
    assert called == Decision(Verdict.ALLOW, Reason.GROUP_MENTION_PATTERN)
    assert decide(group_msg("kithara lessons today"), pol).verdict is Verdict.DROP
    assert decide(group_msg("ask kith later"), pol).verdict is Verdict.DROP


def test_per_group_require_mention_false_answers_everything_there_only() -> None:
    quiet = "-100777"
    pol = policy(
        group=GroupPolicy.ALLOWLIST,
        allow_groups=frozenset({GROUP, quiet}),
        groups={quiet: GroupRule(require_mention=False)},
    )
    free = decide(group_msg("anyone around?", chat_id=quiet), pol)
    assert free == Decision(Verdict.ALLOW, Reason.GROUP_MENTION_NOT_REQUIRED)
    assert decide(group_msg("anyone around?"), pol).verdict is Verdict.DROP


def test_group_decisions_leave_access_state_untouched() -> None:
    _, access = decide_inbound(group_msg(mentioned=True), policy(group=GroupPolicy.OPEN), ACCESS, NOW)
    assert access is ACCESS


# --- Outbound --------------------------------------------------------------------------------------

def test_may_send_refuses_a_dm_to_an_unpaired_account() -> None:
    decision = may_send("telegram", STRANGER, ChatKind.DM, policy(), ACCESS)
    assert decision == Decision(Verdict.DROP, Reason.SEND_DM_NOT_ALLOWED)


@pytest.mark.parametrize("sender", [FRIEND, PAIRED, OWNER])
def test_may_send_allows_a_dm_to_a_known_account(sender: str) -> None:
    assert may_send("telegram", sender, ChatKind.DM, policy(), ACCESS).allowed


def test_may_send_uses_the_recipient_not_the_dm_channel_id() -> None:
    # Discord/Slack DM channels have their own ids; the person is what must be approved.
    pol = policy(allow_from=frozenset())
    access = AccessState(approved=frozenset({"discord:42"}))
    assert may_send("discord", "dmchan-9", ChatKind.DM, pol, access, recipient_id="42").allowed
    assert not may_send("discord", "dmchan-9", ChatKind.DM, pol, access).allowed
    assert not may_send("discord", "dmchan-9", ChatKind.DM, pol, access, recipient_id="43").allowed


def test_may_send_refuses_an_unlisted_group_and_allows_a_listed_one() -> None:
    pol = policy(allow_groups=frozenset({GROUP}))
    assert may_send("telegram", "-1", ChatKind.GROUP, pol, ACCESS) == Decision(
        Verdict.DROP, Reason.SEND_GROUP_NOT_ALLOWED
    )
    assert may_send("telegram", GROUP, ChatKind.GROUP, pol, ACCESS).allowed


def test_may_send_refuses_everything_on_a_disabled_platform() -> None:
    pol = policy(DmPolicy.DISABLED, group=GroupPolicy.DISABLED, allow_groups=frozenset({GROUP}))
    assert may_send("telegram", OWNER, ChatKind.DM, pol, ACCESS).reason == Reason.SEND_DM_DISABLED
    assert may_send("telegram", GROUP, ChatKind.GROUP, pol, ACCESS).reason == Reason.SEND_GROUP_DISABLED


def test_may_send_under_open_dms_allows_anyone() -> None:
    assert may_send("telegram", STRANGER, ChatKind.DM, policy(DmPolicy.OPEN), ACCESS).allowed


# --- Config -----------------------------------------------------------------------------------------

CONFIG = """
[policy.telegram]
dm = "allowlist"
group = "open"
allow_from = [12345, "telegram:678", "900"]
allow_groups = [-1001234]
require_mention = true
mention_patterns = ["^kith\\\\b"]

[policy.telegram.groups."-1001234"]
require_mention = false

[policy.telegram.groups."-1005678"]
mention_patterns = []

[policy.slack]
dm = "open"
"""


def test_config_parses_into_policies_with_inherited_group_rules() -> None:
    settings = PolicySettings.from_mapping(tomllib.loads(CONFIG)["policy"])
    tg = settings.for_platform("telegram")
    assert tg.dm is DmPolicy.ALLOWLIST and tg.group is GroupPolicy.OPEN
    assert tg.allow_from == {"12345", "678", "900"}
    assert tg.allow_groups == {"-1001234"}
    assert tg.rule_for("-1001234") == GroupRule(require_mention=False, mention_patterns=(r"^kith\b",))
    assert tg.rule_for("-1005678") == GroupRule(require_mention=True, mention_patterns=())
    assert tg.rule_for("-1") == GroupRule(require_mention=True, mention_patterns=(r"^kith\b",))
    assert settings.for_platform("slack").dm is DmPolicy.OPEN
    assert settings.for_platform("slack").group is GroupPolicy.ALLOWLIST


def test_parsed_config_decides_like_it_reads() -> None:
    tg = PolicySettings.from_mapping(tomllib.loads(CONFIG)["policy"]).for_platform("telegram")
    assert decide(dm("678"), tg, AccessState()).verdict is Verdict.ALLOW
    assert decide(dm("679"), tg, AccessState()).verdict is Verdict.DROP
    assert decide(group_msg("Kith: hi", chat_id="-1"), tg).verdict is Verdict.ALLOW
    assert decide(group_msg("Kith: hi", chat_id="-1005678"), tg).verdict is Verdict.DROP


def test_unconfigured_platform_gets_safe_defaults() -> None:
    settings = PolicySettings.from_mapping(None)
    assert settings.for_platform("discord") == PlatformPolicy()
    assert PlatformPolicy().dm is DmPolicy.PAIRING and PlatformPolicy().group is GroupPolicy.ALLOWLIST


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"telegarm": {}}, "policy.telegarm"),
        ({"telegram": {"dm_policy": "open"}}, "policy.telegram.dm_policy"),
        ({"telegram": {"dm": "everyone"}}, "policy.telegram.dm"),
        ({"telegram": {"group": 3}}, "policy.telegram.group"),
        ({"telegram": {"allow_from": "123"}}, "policy.telegram.allow_from"),
        ({"telegram": {"allow_from": ["1", True]}}, "policy.telegram.allow_from[1]"),
        ({"telegram": {"allow_groups": [" "]}}, "policy.telegram.allow_groups[0]"),
        ({"telegram": {"require_mention": "yes"}}, "policy.telegram.require_mention"),
        ({"telegram": {"mention_patterns": ["(unclosed"]}}, "policy.telegram.mention_patterns[0]"),
        ({"telegram": {"mention_patterns": [""]}}, "policy.telegram.mention_patterns[0]"),
        ({"telegram": []}, "policy.telegram"),
        ({"telegram": {"groups": {"-1": {"mention": True}}}}, 'policy.telegram.groups."-1".mention'),
        ({"telegram": {"groups": {"-1": {"require_mention": 0}}}},
         'policy.telegram.groups."-1".require_mention'),
        ({"telegram": {"groups": {"-1": {"mention_patterns": ["["]}}}},
         'policy.telegram.groups."-1".mention_patterns[0]'),
        ({"telegram": {"rate_limit_burst": 0}}, "policy.telegram.rate_limit_burst"),
        ({"telegram": {"rate_limit_burst": 2.5}}, "policy.telegram.rate_limit_burst"),
        ({"telegram": {"rate_limit_per_minute": -1}}, "policy.telegram.rate_limit_per_minute"),
        ({"telegram": {"rate_limit_per_minute": "fast"}}, "policy.telegram.rate_limit_per_minute"),
    ],
)
def test_config_errors_name_the_key(table: dict[str, object], key: str) -> None:
    with pytest.raises(PolicyConfigError) as excinfo:
        PolicySettings.from_mapping(table, platforms=PLATFORMS)
    assert excinfo.value.key == key
    assert str(excinfo.value).startswith(f"{key}: ")


@pytest.mark.parametrize("dm_policy", list(DmPolicy))
@pytest.mark.parametrize("sender", [FRIEND, PAIRED, OWNER, STRANGER])
def test_a_dm_sender_let_in_is_exactly_one_kith_may_write_to(dm_policy: DmPolicy, sender: str) -> None:
    """Inbound DMs, outbound DMs and the linked-account check give one answer for every sender."""
    policy = PlatformPolicy(dm=dm_policy, allow_from=frozenset({FRIEND}))
    inbound, _ = decide_inbound(dm(sender), policy, ACCESS, NOW, rng=random.Random(1).choice)
    outbound = may_send("telegram", sender, ChatKind.DM, policy, ACCESS)
    assert inbound.allowed == outbound.allowed == dm_allowed(policy, ACCESS, "telegram", sender)
    assert inbound.allowed == (dm_policy is DmPolicy.OPEN or (dm_policy is not DmPolicy.DISABLED
                                                              and sender != STRANGER))
