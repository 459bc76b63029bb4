"""``bot.py web url``: the running bot's page address with a new single-use sign-in link (:mod:`kith.web`).

The body runs in the bot (the link's token is the bot's own, kept in its memory); with no bot running, or one
whose page is off, it says so.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kith.control.parts import Console, Parts


def add_web_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "web", help="the memory room: print the running bot's page address with a one-time sign-in link",
        description="The memory room, a local web page the running bot serves ([web] enabled).")
    actions = p.add_subparsers(dest="web_action", metavar="ACTION", required=True)
    actions.add_parser("url", help="the page's address with a new one-time sign-in link")
    return p


async def url_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    if not parts.live:
        console.err.write("kith: no bot is running: start it (`bot.py run`) with [web] enabled = true\n")
        return 1
    web = getattr(getattr(parts, "app", None), "web", None)
    if web is None:
        console.err.write("kith: the running bot serves no page: set [web] enabled = true and restart it\n")
        return 1
    console.out.write(web.login_url() + "\n")
    return 0
