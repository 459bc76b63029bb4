"""``bot.py people list|link ACCOUNT --to ACCOUNT|unlink ACCOUNT``: the owner's view of people."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core import loop
from core.types import printable_name

if TYPE_CHECKING:  # the parser is built for --help, which must not load SQLAlchemy or Chroma
    from core.config import Settings


def add_people_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg]
    p = sub.add_parser("people", help="list people and link or unlink their accounts",
                       description="One person can talk to kith from several platforms.")
    actions = p.add_subparsers(dest="people_action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every person and their accounts")
    link = actions.add_parser("link", help="make ACCOUNT the same person as --to ACCOUNT")
    link.add_argument("account", help="e.g. slack:T01:U02")
    link.add_argument("--to", required=True, metavar="ACCOUNT", help="an account of the person, e.g. telegram:42")
    unlink = actions.add_parser("unlink", help="give ACCOUNT a person of its own again (its memory stays)")
    unlink.add_argument("account")
    return p


def run_people(settings: Settings, args: argparse.Namespace) -> int:
    return loop.run(_run(settings, args))


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    from core import people
    from core.app import open_database
    from core.linking import link_account

    now = datetime.now(UTC)
    db = open_database(settings)
    try:
        if args.people_action == "list":
            rows = db.run_sync(people.all_accounts)
            persons: dict[str, list[str]] = {}
            for row in rows:
                persons.setdefault(row.person, []).append(row.account + (f" ({printable_name(row.display_name)})"
                                                                         if row.display_name else ""))
            print(f"people: {len(persons)}")
            for person, accounts in persons.items():
                print(f"  {person}: {', '.join(accounts)}")
            return 0
        if args.people_action == "unlink":
            person = db.run_sync(people.unlink, args.account, now)
            if person is None:
                print(f"kith: unknown account {args.account}")
                return 1
            print(f"unlinked {args.account}: now {person}")
            return 0
        target = db.run_sync(people.person_of, args.to)
        if target is None:
            print(f"kith: unknown account {args.to}")
            return 1
        result = db.run_sync(link_account, args.account, target, now)
        if result.old_person:
            from heartbeat.goals import reassign as reassign_goals
            from memory.controls import PauseBook
            from memory.questions import QuestionBook
            from memory.service import MemoryService
            from persona.llm import LLMClient

            memory = await MemoryService.open(settings, db, LLMClient(settings.llm), announce=False)
            try:
                moved = await memory.reassign(result.old_person, target)
            finally:
                await memory.close()
            # Everything else that follows the person, as /link in chat moves it.
            await QuestionBook(db, lambda: now).reassign(result.old_person, target)
            await PauseBook(db).reassign(result.old_person, target)
            await db.run(reassign_goals, result.old_person, target)
            print(f"linked {args.account} to {target} (moved {sum(moved.values())} memory records)")
        else:
            print(f"linked {args.account} to {target}")
        return 0
    finally:
        db.close()
