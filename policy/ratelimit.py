"""A per-sender token bucket: a burst at once, then a steady refill per minute.

A refused sender is told so once per flood: the first refusal notifies, later ones are silent, and
only a bucket that refilled completely (the sender paused) starts a new streak. A message let through
by a token that trickled back mid-flood does not, or a steady flood would earn a notice per token.
Refusals spend no tokens, so a sender who keeps hammering is let through as soon as a token is back.

The buckets live in memory only: losing them on restart hands everyone a fresh burst, which is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ground.tunables import RATE_LIMIT_BURST, RATE_LIMIT_PER_MINUTE
from policy.rules import Decision, Reason, Verdict

RATE_LIMIT_NOTICE = "You're writing faster than I can keep up with. Give me a moment, then try again."

_EPSILON = 1e-9  # float refill may land a hair under a whole token that is really there
_PRUNE_FLOOR = 1_024  # tracked senders before the first sweep; sweeps are lossless, so this is no tunable


@dataclass(frozen=True)
class TokenBucket:
    tokens: float
    updated_at: float  # seconds on the caller's clock (monotonic is best)
    notified: bool = False  # the current refusal streak has had its notice


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    notify: bool  # send RATE_LIMIT_NOTICE: the first refusal of a streak
    retry_after_s: float = 0.0  # until the next token; for logs, never shown to the person

    def decision(self) -> Decision:
        if self.allowed:
            return Decision(Verdict.ALLOW, Reason.RATE_OK)
        if self.notify:
            return Decision(Verdict.NOTICE, Reason.RATE_LIMITED, notice=RATE_LIMIT_NOTICE)
        return Decision(Verdict.DROP, Reason.RATE_LIMITED_NOTIFIED)


def refill(bucket: TokenBucket, now: float, *, burst: int, per_minute: float) -> TokenBucket:
    elapsed = max(0.0, now - bucket.updated_at)  # a clock that steps back refills nothing
    tokens = min(float(burst), bucket.tokens + elapsed * per_minute / 60.0)
    return replace(bucket, tokens=tokens, updated_at=max(now, bucket.updated_at))


def take(
    bucket: TokenBucket | None, now: float, *, burst: int, per_minute: float
) -> tuple[RateDecision, TokenBucket]:
    """Spend one token if there is one; ``None`` is a sender not seen recently (a full bucket)."""
    current = (
        TokenBucket(tokens=float(burst), updated_at=now)
        if bucket is None
        else refill(bucket, now, burst=burst, per_minute=per_minute)
    )
    if current.tokens + _EPSILON >= 1.0:
        rested = current.tokens + _EPSILON >= burst
        spent = replace(current, tokens=max(0.0, current.tokens - 1.0), notified=current.notified and not rested)
        return RateDecision(allowed=True, notify=False), spent
    retry_after_s = (1.0 - current.tokens) * 60.0 / per_minute
    decision = RateDecision(allowed=False, notify=not current.notified, retry_after_s=retry_after_s)
    return decision, replace(current, notified=True)


class RateLimiter:
    """Token buckets keyed by sender account; the clock is the caller's ``now``."""

    def __init__(self, burst: int = RATE_LIMIT_BURST, per_minute: float = RATE_LIMIT_PER_MINUTE) -> None:
        if burst < 1:
            raise ValueError("burst must be at least 1")
        if per_minute <= 0:
            raise ValueError("per_minute must be positive")
        self.burst = burst
        self.per_minute = per_minute
        self._buckets: dict[str, TokenBucket] = {}
        self._sweep_above = _PRUNE_FLOOR

    def check(self, sender: str, now: float) -> RateDecision:
        decision, bucket = take(self._buckets.get(sender), now, burst=self.burst, per_minute=self.per_minute)
        self._buckets[sender] = bucket
        if len(self._buckets) > self._sweep_above:
            self.prune(now)
            self._sweep_above = max(_PRUNE_FLOOR, 2 * len(self._buckets))
        return decision

    def prune(self, now: float) -> int:
        """Forget buckets that have refilled: a full bucket behaves exactly like an unseen sender."""
        full = [sender for sender, bucket in self._buckets.items() if self._is_full(bucket, now)]
        for sender in full:
            del self._buckets[sender]
        return len(full)

    def _is_full(self, bucket: TokenBucket, now: float) -> bool:
        refilled = refill(bucket, now, burst=self.burst, per_minute=self.per_minute)
        return refilled.tokens + _EPSILON >= self.burst

    def __len__(self) -> int:
        return len(self._buckets)
