"""The fault suite's own count, tested apart from any bot: a suite that miscounts proves nothing."""

from __future__ import annotations

import json

from tests.support.faults import Ledger, crash_window_gaps, judge, to_json


def test_each_message_is_answered_once_doubled_honest_or_lost() -> None:
    ledger = Ledger()
    a1, a2, a3, a4 = (ledger.new("a") for _ in range(4))
    b1 = ledger.new("b")
    outgoing = [("a", f"echo: {a1}"), ("a", f"echo: {a1}"),  # a1 twice
                ("a", "I can't reach my model right now"),  # stands for a2, between a1 and a4
                ("a", f"echo: {a4}")]  # a3 was merged into the honest gap too; b1 never answered
    tally = judge(ledger, outgoing)
    assert (tally.once, tally.doubled, tally.honest, tally.lost) == (1, 1, 2, 1)
    assert tally.doubled_tokens == [a1] and tally.lost_tokens == [b1]
    assert {a2, a3}.isdisjoint(tally.lost_tokens)


def test_a_double_counts_as_the_crash_window_only_when_its_first_copy_went_out_just_before_a_kill() -> None:
    outgoing = [("a", "echo: kf000001"), ("a", "echo: kf000002"), ("a", "echo: kf000001"), ("a", "echo: kf000002")]
    first_seen = [10.0, 20.0, 30.0, 31.0]
    kills = [10.3, 25.0]  # 0.3 s after kf000001's first copy; 5 s after kf000002's
    gaps = crash_window_gaps(outgoing, first_seen, kills, ["kf000001", "kf000002"], window_s=1.0)
    assert len(gaps) == 1 and abs(gaps[0] - 0.3) < 1e-9
    assert crash_window_gaps(outgoing, first_seen, [], ["kf000001"], window_s=1.0) == []
    assert crash_window_gaps(outgoing, first_seen, [9.0], ["kf000001"], window_s=1.0) == []  # kill came before
    # A copy seen just after a kill was already on its way when the process died: the crash window too.
    in_flight = crash_window_gaps(outgoing, first_seen, [9.9], ["kf000001"], window_s=1.0, in_flight_s=0.25)
    assert len(in_flight) == 1 and abs(in_flight[0] + 0.1) < 1e-9


def test_the_json_report_names_the_lost_and_doubled_messages() -> None:
    ledger = Ledger()
    a1, a2 = ledger.new("a"), ledger.new("a")
    tally = judge(ledger, [("a", f"echo: {a1}"), ("a", f"echo: {a1}")], "slack", "crash loop")
    [row] = json.loads(to_json([tally]))
    assert row["doubled_tokens"] == [a1] and row["lost_tokens"] == [a2]
