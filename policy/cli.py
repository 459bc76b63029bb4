"""``bot.py pairing list|approve CODE|revoke ACCOUNT``: the owner's side of DM pairing."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the parser is built for --help, which must not load SQLAlchemy
    from core.db import Database


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


def run_pairing(db: Database, args: argparse.Namespace, now: datetime | None = None) -> int:
    from policy import store
    from policy.pairing import AccessState, PairingError, approve, list_pending, revoke

    now = now or datetime.now(UTC)
    if args.pairing_action == "list":
        access, _ = db.run_sync(store.load)
        pending = list_pending(access, now)
        print(f"pending: {len(pending)}")
        for p in pending:
            minutes = int((p.expires_at - now).total_seconds() // 60)
            print(f"  {p.code}  {p.account}  expires in {minutes} min")
        print(f"approved: {len(access.approved | ({access.owner} if access.owner else set()))}")
        for account in sorted(access.approved | ({access.owner} if access.owner else set())):
            print(f"  {account}{'  (owner)' if account == access.owner else ''}")
        return 0
    try:
        if args.pairing_action == "approve":
            def do_approve(access: AccessState) -> tuple[str, AccessState]:
                new_state, request = approve(access, args.code, now, make_owner=args.owner)
                return request.account, new_state

            account = store.update_outside_the_gate(db, do_approve)
            print(f"approved {account}{' as owner' if args.owner else ''}")
            return 0
        store.update_outside_the_gate(db, lambda access: (None, revoke(access, args.account)))
        print(f"revoked {args.account}")
        return 0
    except PairingError as exc:
        print(f"kith: {exc}")
        return 1
