"""Every operator command the control channel carries: its body, its arguments, whether it writes.

One description per command, used by both hosts: the client turns the parsed command line into a
request (:func:`request_args`), the host checks the request against the same description
(:func:`namespace_of`) and runs the body. A body is named (``module:function``) and loaded by the host
that runs it: the client sending a request to a running bot never loads one. A request naming no
command here, or carrying arguments of the wrong names or types, is a
:class:`~kith.control.frames.BadRequest`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from kith.control.frames import BadRequest
from kith.control.parts import Console, Parts

Body = Callable[[Parts, argparse.Namespace, Console], Awaitable[int]]

# The JSON shapes an argument may take.
TEXT = (str,)
MAYBE_TEXT = (str, type(None))
FLAG = (bool,)
WORDS = (list,)
MAYBE_WORDS = (list, type(None))
NUMBER = (int,)

WHO = {"account": MAYBE_TEXT, "person": MAYBE_TEXT}


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    body: str  # "module:function", an async function (parts, args, console) -> exit code
    fields: Mapping[str, tuple[type, ...]] = field(default_factory=dict)
    writes: bool = True  # runs one at a time with the other writers in the bot
    # A heartbeat job (consolidate, a tick, decay, its undo) waits in the heartbeat's own line, one job at a time
    # beside the bot's scheduled runs, as those run beside every command: queued with the other writers too, a
    # fold of many days would hold up a link or a forget for minutes.
    heartbeat_job: bool = False

    def load(self) -> Body:
        module, _, function = self.body.partition(":")
        return cast(Body, getattr(importlib.import_module(module), function))


async def store_checks_body(parts: Parts, _args: argparse.Namespace, console: Console) -> int:
    results = await parts.store_checks()
    console.send_data([{"name": r.name, "ok": r.ok, "detail": r.detail, "warn": r.warn} for r in results])
    return 0


M, P, H = "kith.operator.memory_cli:", "kith.operator.people_cli:", "kith.operator.heartbeat_cli:"
G = "kith.operator.graph_cli:"
PAIRING = "kith.operator.policy_cli:pairing_body"
OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("memory.list", M + "list_body", {**WHO, "notes": FLAG, "all": FLAG}, writes=False),
    Operation("memory.show", M + "show_body", {**WHO, "memory_id": TEXT}, writes=False),
    Operation("memory.search", M + "search_body", {**WHO, "query": WORDS, "limit": NUMBER}, writes=False),
    Operation("memory.label", M + "label_body", {**WHO, "memory_id": TEXT, "label": WORDS}),
    Operation("memory.forget", M + "forget_body", {**WHO, "query": WORDS, "yes": FLAG, "preview": FLAG,
                                                   "expect": MAYBE_WORDS}),
    Operation("memory.export", M + "export_body", WHO, writes=False),
    Operation("memory.reembed", M + "reembed_body"),
    Operation("memory.undo-decay", H + "undo_decay_body", heartbeat_job=True),
    Operation("graph.show", G + "show_body", WHO, writes=False),
    Operation("graph.draw", G + "draw_body", WHO, writes=False),
    Operation("graph.unmerge", G + "unmerge_body", {**WHO, "name": TEXT}),
    Operation("graph.merge", G + "merge_body", {**WHO, "name": TEXT, "into": TEXT}),
    Operation("people.list", P + "list_body", writes=False),
    Operation("people.link", P + "link_body", {"account": TEXT, "to": TEXT}),
    Operation("people.unlink", P + "unlink_body", {"account": TEXT}),
    Operation("pairing.list", PAIRING, {"pairing_action": TEXT}, writes=False),
    Operation("pairing.approve", PAIRING, {"pairing_action": TEXT, "code": TEXT, "owner": FLAG}),
    Operation("pairing.revoke", PAIRING, {"pairing_action": TEXT, "account": TEXT}),
    Operation("consolidate", H + "consolidate_body", heartbeat_job=True),
    Operation("heartbeat", H + "heartbeat_body", {"any_hour": FLAG}, heartbeat_job=True),
    Operation("decay", H + "decay_body", heartbeat_job=True),
    Operation("doctor.stores", "kith.control.operations:store_checks_body", writes=False),
    Operation("web.url", "kith.web.url_cli:url_body", writes=False),
)}


def operation_of(name: str) -> Operation:
    try:
        return OPERATIONS[name]
    except KeyError:
        raise BadRequest(f"no command {name!r}") from None


def request_args(op: Operation, args: argparse.Namespace, **changes: Any) -> dict[str, Any]:
    """The request's arguments: exactly the fields ``op`` takes, from the parsed command line."""
    values = {name: getattr(args, name, False if allowed == FLAG else None) for name, allowed in op.fields.items()}
    values.update(changes)
    return values


def namespace_of(op: Operation, args: Mapping[str, Any]) -> argparse.Namespace:
    """The body's arguments, checked against ``op``'s description."""
    if set(args) != set(op.fields):
        raise BadRequest(f"{op.name} takes the arguments {sorted(op.fields)}")
    for name, allowed in op.fields.items():
        value = args[name]
        # bool is an int in Python; JSON's true is not a number here.
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise BadRequest(f"{op.name}: {name} has the wrong type")
        if isinstance(value, list) and not all(isinstance(item, str) for item in value):
            raise BadRequest(f"{op.name}: {name} must be a list of strings")
    return argparse.Namespace(**args)


async def run_operation(parts: Parts, name: str, args: Mapping[str, Any], console: Console) -> int:
    """Check the request and run its body on ``parts`` (either host)."""
    op = operation_of(name)
    return await op.load()(parts, namespace_of(op, args), console)
