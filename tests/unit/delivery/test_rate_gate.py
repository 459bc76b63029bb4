"""One chat's rate gate: a platform's wait closes the chat for every writer until it passes, and only that chat."""

from __future__ import annotations

from delivery.rate_gate import RateGate


def test_a_wait_closes_that_chat_only_and_the_longest_wait_wins() -> None:
    now = [100.0]
    gate = RateGate(clock=lambda: now[0])
    assert gate.wait_s("telegram", "1") == 0.0
    gate.refused("telegram", "1", 7)
    gate.refused("telegram", "1", 2)  # a shorter wait heard later does not shorten the first
    assert gate.wait_s("telegram", "1") == 7.0
    assert gate.wait_s("telegram", "2") == 0.0 and gate.wait_s("discord", "1") == 0.0
    now[0] += 6.5
    assert gate.wait_s("telegram", "1") == 0.5
    now[0] += 1
    assert gate.wait_s("telegram", "1") == 0.0
