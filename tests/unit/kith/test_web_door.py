"""The page's door: single-use login tokens, sessions that end, and each session's form token (no server)."""

from __future__ import annotations

import itertools

from kith.web.door import Door


def door(**limits: float) -> Door:
    counter = itertools.count()
    values = {"token_ttl_s": 60.0, "session_ttl_s": 3600.0, "tokens_max": 3, "sessions_max": 2, **limits}
    return Door(token_ttl_s=values["token_ttl_s"], session_ttl_s=values["session_ttl_s"],
                tokens_max=int(values["tokens_max"]), sessions_max=int(values["sessions_max"]),
                new_secret=lambda: f"secret-{next(counter)}")


def test_a_login_token_signs_in_once() -> None:
    d = door()
    token = d.issue(0.0)
    signed = d.redeem(token, 1.0)
    assert signed is not None and d.session(signed.cookie, 2.0) == signed.session
    assert d.redeem(token, 2.0) is None  # spent


def test_an_expired_or_unknown_token_opens_nothing_and_is_spent() -> None:
    d = door()
    token = d.issue(0.0)
    assert d.redeem(token, 60.0) is None
    assert d.redeem(token, 1.0) is None  # gone, even before its time would have run out
    assert d.redeem("never-issued", 1.0) is None
    assert d.redeem("", 1.0) is None


def test_a_session_ends_after_its_time_and_on_sign_out() -> None:
    d = door()
    signed = d.redeem(d.issue(0.0), 0.0)
    assert signed is not None
    assert d.session(signed.cookie, 3599.0) is not None
    assert d.session(signed.cookie, 3600.0) is None
    other = d.redeem(d.issue(0.0), 0.0)
    assert other is not None
    d.end(other.cookie)
    assert d.session(other.cookie, 1.0) is None
    assert d.session(None, 1.0) is None and d.session("made-up", 1.0) is None


def test_too_many_tokens_or_sessions_drop_the_oldest() -> None:
    d = door()
    first, *rest = [d.issue(0.0) for _ in range(4)]
    assert d.redeem(first, 1.0) is None
    signed = [d.redeem(token, 1.0) for token in rest]
    assert all(s is not None for s in signed)
    assert d.session(signed[0].cookie, 2.0) is None  # type: ignore[union-attr]
    assert d.open_sessions == 2


def test_a_form_passes_only_with_its_own_sessions_token() -> None:
    d = door()
    a, b = d.redeem(d.issue(0.0), 0.0), d.redeem(d.issue(0.0), 0.0)
    assert a is not None and b is not None
    assert Door.form_ok(a.session, a.session.csrf)
    assert not Door.form_ok(a.session, b.session.csrf)
    assert not Door.form_ok(a.session, None) and not Door.form_ok(a.session, "")


def test_the_door_keeps_digests_not_the_secrets_it_gave_out() -> None:
    d = door()
    token = d.issue(0.0)
    signed = d.redeem(d.issue(0.0), 0.0)
    assert signed is not None
    held = repr(vars(d))
    assert token not in held and signed.cookie not in held
