"""Who may use the page: single-use login tokens exchanged for sessions, and each session's form token.

Pure rules over the time they are given (a monotonic clock's seconds), no I/O: :class:`Door` keeps, in the
bot's memory only, the login tokens it printed and the sessions it opened. A restart forgets both, so a bot
that stopped signs every browser out.

* A login token works once, within ``token_ttl_s`` of being printed; redeeming it spends it whether or not
  it was still valid. At most ``tokens_max`` wait at once (the oldest go first).
* A session lasts ``session_ttl_s`` from sign-in; at most ``sessions_max`` are open (the oldest ends first).
* Every form carries its session's CSRF token (:meth:`Door.form_ok`); a forged post from another site has
  the browser's cookie at most (SameSite=Strict keeps even that away), never the token.

Tokens and session ids are kept as their SHA-256 digests: what the bot holds cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "kith_session"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Session:
    key: str  # the digest of the cookie's value
    csrf: str  # the token every form of this session carries
    expires_at: float


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A redeemed login token: the cookie's value (given to the browser once) and its session."""

    cookie: str
    session: Session


class Door:
    def __init__(self, *, token_ttl_s: float, session_ttl_s: float, tokens_max: int, sessions_max: int,
                 new_secret: Callable[[], str] = lambda: secrets.token_urlsafe(32)) -> None:
        self.token_ttl_s = token_ttl_s
        self.session_ttl_s = session_ttl_s
        self.tokens_max = tokens_max
        self.sessions_max = sessions_max
        self.new_secret = new_secret
        self._tokens: dict[str, float] = {}  # digest -> expires at (insertion order: oldest first)
        self._sessions: dict[str, Session] = {}  # digest of the cookie -> session

    def issue(self, now: float) -> str:
        """A new login token, valid once within ``token_ttl_s``."""
        self._drop_expired(now)
        while len(self._tokens) >= self.tokens_max:
            del self._tokens[next(iter(self._tokens))]
        token = self.new_secret()
        self._tokens[_digest(token)] = now + self.token_ttl_s
        return token

    def redeem(self, token: str, now: float) -> SignedIn | None:
        """The session a login token opens; None for a token never issued, spent or expired."""
        expires_at = self._tokens.pop(_digest(token), None)
        if expires_at is None or now >= expires_at:
            return None
        self._drop_expired(now)
        while len(self._sessions) >= self.sessions_max:
            del self._sessions[next(iter(self._sessions))]
        cookie = self.new_secret()
        session = Session(_digest(cookie), self.new_secret(), now + self.session_ttl_s)
        self._sessions[session.key] = session
        return SignedIn(cookie, session)

    def session(self, cookie: str | None, now: float) -> Session | None:
        """The open session a browser's cookie names; None without one, or past its time."""
        if not cookie:
            return None
        session = self._sessions.get(_digest(cookie))
        if session is None:
            return None
        if now >= session.expires_at:
            del self._sessions[session.key]
            return None
        return session

    def end(self, cookie: str | None) -> None:
        if cookie:
            self._sessions.pop(_digest(cookie), None)

    @staticmethod
    def form_ok(session: Session, submitted: str | None) -> bool:
        """A form's CSRF token is its session's (compared in constant time)."""
        return bool(submitted) and hmac.compare_digest(session.csrf.encode(), (submitted or "").encode())

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    def _drop_expired(self, now: float) -> None:
        self._tokens = {k: at for k, at in self._tokens.items() if now < at}
        self._sessions = {k: s for k, s in self._sessions.items() if now < s.expires_at}
