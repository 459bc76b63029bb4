"""The per-sender rate limit: a burst, a steady refill, one polite notice per refusal streak."""

from __future__ import annotations

import pytest

from policy.ratelimit import RATE_LIMIT_NOTICE, RateLimiter
from policy.rules import Decision, Reason, Verdict

BURST = 8
PER_MINUTE = 20.0  # one token every 3 s


def limiter() -> RateLimiter:
    return RateLimiter(burst=BURST, per_minute=PER_MINUTE)


def test_burst_then_refusal_with_exactly_one_notice() -> None:
    rl = limiter()
    assert all(rl.check("telegram:1", 0.0).allowed for _ in range(BURST))
    refusals = [rl.check("telegram:1", 0.5) for _ in range(5)]
    assert not any(r.allowed for r in refusals)
    assert [r.notify for r in refusals] == [True, False, False, False, False]
    assert refusals[0].decision() == Decision(Verdict.NOTICE, Reason.RATE_LIMITED, notice=RATE_LIMIT_NOTICE)
    assert refusals[1].decision() == Decision(Verdict.DROP, Reason.RATE_LIMITED_NOTIFIED)


def test_refill_over_injected_time() -> None:
    rl = limiter()
    for _ in range(BURST):
        rl.check("telegram:1", 100.0)
    assert not rl.check("telegram:1", 102.9).allowed
    assert rl.check("telegram:1", 103.0).allowed  # one token after 3 s
    assert not rl.check("telegram:1", 103.0).allowed
    # A long pause refills to the burst, never beyond it.
    later = 103.0 + 3600.0
    assert sum(rl.check("telegram:1", later).allowed for _ in range(BURST + 3)) == BURST


def test_a_steady_flood_gets_one_notice_and_a_pause_starts_a_new_streak() -> None:
    rl = limiter()
    decisions = [rl.check("telegram:1", t * 1.0) for t in range(60)]  # one a second for a minute, refill one in 3 s
    assert sum(d.allowed for d in decisions) == BURST + 19
    assert sum(d.notify for d in decisions) == 1  # not one per token that trickled back
    rested = 59.0 + BURST * 60.0 / PER_MINUTE  # long enough for the whole burst to come back
    assert all(rl.check("telegram:1", rested).allowed for _ in range(BURST))
    again = rl.check("telegram:1", rested)
    assert not again.allowed and again.notify


def test_refusals_spend_no_tokens() -> None:
    rl = limiter()
    for _ in range(BURST):
        rl.check("telegram:1", 0.0)
    for i in range(20):
        rl.check("telegram:1", i * 0.1)  # hammering during the wait
    assert rl.check("telegram:1", 3.0).allowed


def test_senders_have_separate_buckets() -> None:
    rl = limiter()
    for _ in range(BURST):
        rl.check("telegram:1", 0.0)
    assert not rl.check("telegram:1", 0.0).allowed
    assert rl.check("telegram:2", 0.0).allowed


def test_retry_after_reports_the_wait_for_logs() -> None:
    rl = limiter()
    for _ in range(BURST):
        rl.check("telegram:1", 0.0)
    refused = rl.check("telegram:1", 1.0)
    assert refused.retry_after_s == pytest.approx(2.0)


def test_a_clock_stepping_back_grants_nothing() -> None:
    rl = limiter()
    for _ in range(BURST):
        rl.check("telegram:1", 50.0)
    assert not rl.check("telegram:1", 10.0).allowed
    assert not rl.check("telegram:1", 52.0).allowed
    assert rl.check("telegram:1", 53.0).allowed


def test_prune_forgets_only_refilled_senders_and_changes_no_outcome() -> None:
    rl = limiter()
    rl.check("telegram:idle", 0.0)
    for _ in range(BURST + 1):
        rl.check("telegram:busy", 20.0)
    assert rl.prune(21.0) == 1  # idle refilled by now; busy is mid-streak
    assert len(rl) == 1
    again = rl.check("telegram:busy", 21.0)
    assert (again.allowed, again.notify) == (False, False)  # still the same streak: no second notice
    assert again.retry_after_s == pytest.approx(2.0)


def test_allowed_decision_lets_the_message_through() -> None:
    assert limiter().check("telegram:1", 0.0).decision() == Decision(Verdict.ALLOW, Reason.RATE_OK)


@pytest.mark.parametrize(("burst", "per_minute"), [(0, 20.0), (5, 0.0)])
def test_nonsense_limits_are_refused(burst: int, per_minute: float) -> None:
    with pytest.raises(ValueError):
        RateLimiter(burst=burst, per_minute=per_minute)
