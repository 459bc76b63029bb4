"""What the page changes, each through the body its operator command or chat command runs, inside the bot.

Approving, denying and revoking pairing, forgetting and exporting run the very operations of
:mod:`kith.control.operations` over the bot's live parts (:class:`kith.control.live.LiveParts`), waiting for the
same one-writer lock the control channel's writers wait for; their output is the page's message. A conflict is
settled by the person's own control (:meth:`memory.controls.MemoryControls.answer`), the path a person's "the
first one" takes in chat.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kith.control.operations import OPERATIONS, run_operation
from kith.control.parts import Console
from kith.web.views import operator_for

if TYPE_CHECKING:
    from kith.control.parts import Parts
    from kith.web.bot import Bot
    from memory.forgetting import ForgetPlan

log = logging.getLogger("kith.web")


@dataclass(frozen=True, slots=True)
class Done:
    ok: bool
    message: str  # what the command said, for the page's notice
    data: Any = None


class Actions:
    """The page's writes over a running bot's parts; ``one_writer`` is the control channel's writers' lock."""

    def __init__(self, app: Bot, parts: Parts, one_writer: asyncio.Lock) -> None:
        self.app = app
        self.parts = parts
        self.one_writer = one_writer

    async def run(self, name: str, **args: Any) -> Done:
        """Operator command ``name`` with ``args``, as the control channel runs it; its output as the message."""
        out, err, data = io.StringIO(), io.StringIO(), []
        console = Console(out, err, data.append)
        op = OPERATIONS[name]
        started = time.perf_counter()
        if op.writes:
            async with self.one_writer:
                code = await run_operation(self.parts, name, args, console)
        else:
            code = await run_operation(self.parts, name, args, console)
        log.info("web command command=%s exit=%d ms=%.1f", name, code, (time.perf_counter() - started) * 1000)
        said = (out.getvalue() + err.getvalue()).strip().removeprefix("kith: ")
        return Done(code == 0, said, data[-1] if data else None)

    async def approve(self, code: str) -> Done:
        return await self.run("pairing.approve", pairing_action="approve", code=code, owner=False)

    async def revoke(self, account: str) -> Done:
        """Revoke an approved account, or deny a pending request (revoking drops its code)."""
        return await self.run("pairing.revoke", pairing_action="revoke", account=account)

    async def link(self, account: str, to: str) -> Done:
        """``account`` becomes the person ``to`` is, everything of theirs moved (``people link``)."""
        if account == to:
            return Done(False, "choose two different accounts")
        return await self.run("people.link", account=account, to=to)

    async def unlink(self, account: str) -> Done:
        """``account`` a person of its own again (``people unlink``); what was remembered stays with the person."""
        return await self.run("people.unlink", account=account)

    async def pin(self, person: str, memory_id: str, pinned: bool) -> Done:
        """Keep a memory in every prompt, or stop: the person's own ``/pin`` and ``/unpin``, with their pin limit."""
        from memory.controls import Refused

        controls = self.app.memory_commands.controls
        try:
            async with self.one_writer:
                if pinned:
                    record = await controls.pin(operator_for(person), memory_id)
                else:
                    record = await controls.unpin(operator_for(person), memory_id)
        except Refused as refused:
            why = {"pin_limit": f"{person} has {refused.subject} pins already, the most there may be",
                   "not_found": "it is no longer current"}.get(refused.reason.value, refused.reason.value)
            return Done(False, f"not {'pinned' if pinned else 'unpinned'}: {why}")
        self.parts.changed(person)
        return Done(True, f"{'pinned' if pinned else 'unpinned'} {record.id}")

    async def relabel(self, person: str, memory_id: str, label: str) -> Done:
        """Correct kith's label for one memory, their words unchanged (``memory label``)."""
        words = label.split()
        if not words:
            return Done(False, "label not changed: the label is empty")
        done = await self.run("memory.label", account=None, person=person, memory_id=memory_id, label=words)
        return Done(done.ok, f"relabelled {memory_id}" if done.ok else done.message)

    async def plan_forget(self, person: str, words: str) -> ForgetPlan:
        """The plan ``memory forget`` shows first (:meth:`memory.service.MemoryService.plan_forget`)."""
        return await self.app.memory.plan_forget(person, words)

    async def forget(self, person: str, words: str, expect: list[str]) -> Done:
        """Forget exactly the plan the operator saw (``expect``): nothing if what matches changed since."""
        return await self.run("memory.forget", account=None, person=person, query=words.split(), yes=False,
                              preview=False, expect=expect)

    async def export(self, person: str) -> Done:
        out, err = io.StringIO(), io.StringIO()
        code = await run_operation(self.parts, "memory.export", {"account": None, "person": person},
                                   Console(out, err))
        return Done(code == 0, err.getvalue().strip() if code else "", out.getvalue())

    async def graph_svg(self, person: str) -> Done:
        """The person's graph as ``bot.py graph draw`` draws it: the graph.draw body's DOT, laid out by Graphviz."""
        from memory.graph import CannotDraw, render_svg

        done = await self.run("graph.draw", account=None, person=person)
        if not done.ok:
            return done
        dot = done.message  # the body's whole output is the DOT source
        try:
            return Done(True, "", await asyncio.to_thread(render_svg, dot))
        except CannotDraw as exc:
            return Done(False, str(exc))

    async def settle(self, person: str, first_id: str, second_id: str, answer: str) -> Done:
        """The person's conflict between two memories settled: keep ``first``, keep ``second``, or ``both`` true.

        As their own answer settles it in chat (:meth:`memory.controls.MemoryControls.answer`): through the open
        question about this pair if kith asked one, else by the same settling with no question
        (:meth:`memory.controls.MemoryControls.settle`)."""
        from memory.controls import Answer, Refused

        controls = self.app.memory_commands.controls
        chosen = {"first": Answer.FIRST, "second": Answer.SECOND, "both": Answer.BOTH}.get(answer)
        if chosen is None:
            return Done(False, f"no answer {answer!r}")
        async with self.one_writer:
            question = next((q for q in await controls.questions.open_of(person)
                             if {q.first_id, q.second_id} == {first_id, second_id}), None)
            try:
                if question is None:
                    resolution = await controls.settle(operator_for(person), first_id, second_id, chosen)
                else:
                    if question.first_id != first_id:  # the question orders the pair its own way
                        chosen = {Answer.FIRST: Answer.SECOND, Answer.SECOND: Answer.FIRST}.get(chosen, chosen)
                    resolution = await controls.answer(operator_for(person), question.id, chosen)
            except Refused as refused:
                if question is None:
                    return Done(False, "not settled: those two are no longer both current and in conflict")
                return Done(False, f"not settled: {refused.reason.value.replace('_', ' ')}")
        self.parts.changed(person)
        if resolution.unlinked:
            return Done(True, "both kept: no longer in conflict")
        return Done(True, f"kept one; {len(resolution.superseded)} superseded")
