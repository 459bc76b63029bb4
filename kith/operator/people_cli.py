"""``bot.py people list|link ACCOUNT --to ACCOUNT|unlink ACCOUNT``: the owner's view of people.

The bodies run in the running bot (a link moves its cached memory, goals and pauses along) or in this
process holding the data directory's lock when no bot runs (:mod:`kith.control`)."""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING

from ground.types import printable_name
from ground.wording import counted
from kith.control.dispatch import run_command

if TYPE_CHECKING:  # the parser is built for --help, which must not load SQLAlchemy or Chroma
    from ground.config import Settings
    from kith.control.parts import Console, Parts


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
    """``bot.py people``: through the running bot, or here holding the data directory's lock."""
    return run_command(settings, f"people.{args.people_action}", args)


# --- the bodies, run by the bot or by a command holding the lock (kith.control.operations) ----------
async def list_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    from people import directory

    rows = await parts.db.run(directory.all_accounts)
    persons: dict[str, list[str]] = {}
    for row in rows:
        persons.setdefault(row.person, []).append(row.account + (f" ({printable_name(row.display_name)})"
                                                                 if row.display_name else ""))
    console.out.write(f"people: {len(persons)}\n")
    for person, accounts in persons.items():
        console.out.write(f"  {person}: {', '.join(accounts)}\n")
    return 0


async def unlink_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    from people import directory

    person = await parts.db.run(directory.unlink, args.account, parts.clock())
    if person is None:
        console.out.write(f"kith: unknown account {args.account}\n")
        return 1
    console.out.write(f"unlinked {args.account}: now {person}\n")
    return 0


async def link_body(parts: Parts, args: argparse.Namespace, console: Console) -> int:
    from conversation.linking import link_account
    from ground.person_data import move_person
    from people import directory, moves

    target = await parts.db.run(directory.person_of, args.to)
    if target is None:
        console.out.write(f"kith: unknown account {args.to}\n")
        return 1
    result = await parts.db.run(link_account, args.account, target, parts.clock())
    if result.old_person:
        # Everything that follows the person moves, as /link in chat moves it (and as the next start would, if
        # this command stopped before the move was done).
        move = functools.partial(move_person, parts.db, await parts.person_data())
        moved = await moves.finish(parts.db, move, result.old_person, target)
        memory = {entry.name for entry in (await parts.memory()).person_data()}
        records = counted(sum(n for name, n in moved.items() if name in memory), "memory record", "memory records")
        console.out.write(f"linked {args.account} to {target} (moved {records})\n")
    else:
        console.out.write(f"linked {args.account} to {target}\n")
    return 0
