#!/usr/bin/env python3
"""kith: a self-hosted AI companion for Telegram, Discord and Slack that remembers with receipts.

This file parses the command line and wires the parts; the logic lives in the packages.
Heavy libraries (litellm, chromadb, the platform SDKs) are imported only by the commands
that need them, so ``--help`` stays fast; an operator command sent to a running bot imports
none of them (kith/control).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable

from ground import loop
from ground.config import ConfigError
from ground.instance import DataDirUnusable, HalfMigrated, usable_data_dir
from ground.private_files import owner_only_umask
from kith.settings import AppSettings, config_path, load_settings


def _settings(args: argparse.Namespace) -> AppSettings:
    """The settings of every command that keeps data (all but ``doctor``, which reports on them instead)."""
    settings = load_settings(config_path(args.config))
    usable_data_dir(settings.storage.data_path())
    return settings


def _setup_logging(verbose: bool, quiet: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # These libraries log request URLs (python-telegram-bot's carry the bot token) or message content at
    # INFO/DEBUG: keep them at WARNING whatever kith's own level is.
    for noisy in ("httpx", "httpcore", "LiteLLM", "chromadb", "telegram", "discord", "slack_bolt", "slack_sdk",
                  "apscheduler", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # python-telegram-bot logs a platform answer that is not JSON (a proxy's HTML error page) at ERROR, with a
    # traceback and the whole body. kith logs every failed request itself, one line by id, so those say nothing
    # new, and a body may hold anything.
    logging.getLogger("telegram.request").setLevel(logging.CRITICAL)


def cmd_chat(args: argparse.Namespace) -> int:
    from kith.app.launch import run_chat

    return loop.run(run_chat(_settings(args), verbose=args.verbose))


def cmd_run(args: argparse.Namespace) -> int:
    if config_path(args.config) is None and sys.stdin.isatty() and sys.stdout.isatty():
        from kith.setup.wizard import offer_setup  # imported only here: setup's modules cost other starts nothing

        stop = offer_setup()
        if stop is not None:
            return stop
    from kith.app.launch import run_all

    return loop.run(run_all(_settings(args), verbose=args.verbose))


def cmd_doctor(args: argparse.Namespace) -> int:
    from kith.operator.doctor import run_doctor

    return loop.run(run_doctor(config_path(args.config)))


def cmd_setup(args: argparse.Namespace) -> int:
    from kith.setup.wizard import run_setup

    return run_setup(args.config)


def cmd_migrate(args: argparse.Namespace) -> int:
    from kith.operator.migrate_cli import run_migrate

    return run_migrate(_settings(args), args.to)


def _operator(name: Callable[[argparse.Namespace], str]) -> Callable[[argparse.Namespace], int]:
    """An operator command: run by the bot on its data directory, or here holding its lock (kith/control)."""

    def command(args: argparse.Namespace) -> int:
        from kith.control.dispatch import run_command

        return run_command(_settings(args), name(args), args)

    return command


cmd_pairing = _operator(lambda args: f"pairing.{args.pairing_action}")
cmd_memory = _operator(lambda args: f"memory.{args.memory_command}")
cmd_people = _operator(lambda args: f"people.{args.people_action}")
cmd_graph = _operator(lambda args: f"graph.{args.graph_action}")
cmd_consolidate = _operator(lambda _args: "consolidate")
cmd_heartbeat = _operator(lambda _args: "heartbeat")
cmd_decay = _operator(lambda _args: "decay")
cmd_web = _operator(lambda args: f"web.{args.web_action}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bot.py", description="kith: a companion that remembers with receipts.")
    parser.add_argument("--config", metavar="PATH", help="TOML config file, with the secrets it names in .env beside "
                        "it (default: $KITH_CONFIG, else ~/.config/kith/config.toml when it exists, else the "
                        "defaults of config.example.toml)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: list[tuple[str, str, Callable[[argparse.Namespace], int]]] = [
        ("setup", "first run: choose the model and platforms, check each, write the config and its .env",
         cmd_setup),
        ("run", "start every channel whose credentials are set (the terminal chat when none are)", cmd_run),
        ("chat", "talk to kith in this terminal (reads one message per line when piped)", cmd_chat),
        ("doctor", "check the config, data directory, database, model, memory store and platform tokens",
         cmd_doctor),
    ]
    for name, help_text, fn in commands:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=fn)
    from kith.operator.policy_cli import add_pairing_parser

    add_pairing_parser(sub).set_defaults(func=cmd_pairing)
    from kith.operator.memory_cli import add_memory_parser

    add_memory_parser(sub).set_defaults(func=cmd_memory)
    from kith.operator.people_cli import add_people_parser

    add_people_parser(sub).set_defaults(func=cmd_people)
    from kith.operator.graph_cli import add_graph_parser

    add_graph_parser(sub).set_defaults(func=cmd_graph)
    from kith.operator.heartbeat_cli import add_consolidate_parser, add_decay_parser, add_heartbeat_parser

    add_consolidate_parser(sub).set_defaults(func=cmd_consolidate)
    add_heartbeat_parser(sub).set_defaults(func=cmd_heartbeat)
    add_decay_parser(sub).set_defaults(func=cmd_decay)
    from kith.web.url_cli import add_web_parser

    add_web_parser(sub).set_defaults(func=cmd_web)
    from kith.operator.migrate_cli import add_migrate_parser

    add_migrate_parser(sub).set_defaults(func=cmd_migrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    owner_only_umask()  # before any file is made: the database, its log, Chroma, exports are the owner's alone
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    _setup_logging(args.verbose, quiet=args.command != "run")
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"kith: config error: {exc}", file=sys.stderr)
        return 2
    except (DataDirUnusable, HalfMigrated) as exc:
        print(f"kith: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
