"""``bot.py pairing list|approve CODE|revoke ACCOUNT``: the owner's side of DM pairing.

:func:`pairing_body` runs in the running bot, whose policy gate sees a change at its next decision, or
in the command's own process holding the data directory's lock when no bot runs (:mod:`kith.control`).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the parser is built for --help, which must not load SQLAlchemy
    from ground.db import Database
    from kith.control.parts import Console, Parts


def add_pairing_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser("pairing", help="list, approve or revoke DM pairing requests",
                       description="Approve the people who asked to talk to kith in a DM.")
    actions = p.add_subparsers(dest="pairing_action", metavar="ACTION", required=True)
    actions.add_parser("list", help="pending codes and approved accounts")
    a = actions.add_parser("approve", help="approve the account that holds CODE")
    a.add_argument("code")
    a.add_argument("--owner", action="store_true", help="also make this account the owner (only if none yet)")
    r = actions.add_parser("revoke", help="withdraw an account's approval, e.g. telegram:12345")
    r.add_argument("account")
    return p


async def pairing_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    """Every pairing action; its few statements run off the event loop, as a thread of the bot's own."""
    buffer = io.StringIO()
    code = await asyncio.to_thread(run_pairing, parts.db, args, parts.clock(), out=buffer)
    console.out.write(buffer.getvalue())
    return code


def run_pairing(db: Database, args: argparse.Namespace, now: datetime | None = None, *,
                out: TextIO | None = None) -> int:
    from policy import store
    from policy.pairing import AccessState, PairingError, approve, list_pending, revoke

    now = now or datetime.now(UTC)

    def say(text: str) -> None:
        (out or sys.stdout).write(text + "\n")

    if args.pairing_action == "list":
        access, _ = db.run_sync(store.load)
        pending = list_pending(access, now)
        say(f"pending: {len(pending)}")
        for p in pending:
            minutes = int((p.expires_at - now).total_seconds() // 60)
            say(f"  {p.code}  {p.account}  expires in {minutes} min")
        say(f"approved: {len(access.approved | ({access.owner} if access.owner else set()))}")
        for account in sorted(access.approved | ({access.owner} if access.owner else set())):
            say(f"  {account}{'  (owner)' if account == access.owner else ''}")
        return 0
    try:
        if args.pairing_action == "approve":
            def do_approve(access: AccessState) -> tuple[str, AccessState]:
                new_state, request = approve(access, args.code, now, make_owner=args.owner)
                return request.account, new_state

            account = store.update_outside_the_gate(db, do_approve)
            say(f"approved {account}{' as owner' if args.owner else ''}")
            return 0
        store.update_outside_the_gate(db, lambda access: (None, revoke(access, args.account)))
        say(f"revoked {args.account}")
        return 0
    except PairingError as exc:
        say(f"kith: {exc}")
        return 1
