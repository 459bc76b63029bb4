"""Which person an operator command is about: ``--account PLATFORM:ID`` or ``--person ID``, one of them."""

from __future__ import annotations

import argparse
from typing import Any


def person_action(actions: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """Add the action ``name`` to ``actions`` (an argparse subparsers group), naming its person one of two ways."""
    sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text, description=help_text)
    who = sub.add_mutually_exclusive_group(required=True)
    who.add_argument("--account", metavar="PLATFORM:ID", help="one of the person's accounts, e.g. telegram:42")
    who.add_argument("--person", metavar="PERSON_ID", help="the person id, e.g. p_0123456789abcdef")
    return sub
