"""A streamed answer put back together from its chunks, as an unstreamed one would have read.

litellm's own ``stream_chunk_builder`` does this too, but it also counts the prompt's and the answer's tokens
when the provider sent no usage, loading a tokenizer for it: 41 MB more in the model process and a count over
the whole prompt after every streamed reply, for a figure kith never reads. This reads only what the chunks
carry: their text, their tool calls (a call's name and id come once, its arguments in pieces, all under the
call's ``index``) and the usage a provider sends at the end when it does.

Chunks are read by attribute, in the shape litellm gives every provider's stream (``choices[0].delta``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembly:
    """The answer so far: ``add`` each chunk in order; ``text``, ``tool_calls`` and ``usage`` at the end."""

    def __init__(self) -> None:
        self.text = ""
        self._calls: list[_CallParts] = []
        self._open: dict[int, _CallParts] = {}  # by the chunks' index: the call its next pieces belong to
        self.usage: dict[str, int] = {}

    def add(self, chunk: Any) -> bool:
        """Take one chunk; whether the text grew."""
        self._take_usage(getattr(chunk, "usage", None))
        try:
            delta = chunk.choices[0].delta
        except (AttributeError, IndexError, TypeError):
            return False  # a chunk with no choice: the usage at the end, or a keep-alive
        for position, call in enumerate(getattr(delta, "tool_calls", None) or ()):
            self._take_call(position, call)
        content = getattr(delta, "content", None)
        if isinstance(content, str) and content:
            self.text += content
            return True
        return False

    @property
    def tool_calls(self) -> list[tuple[str, str, str]]:
        """Each call as (id, name, arguments), in the order they began."""
        return [(c.id, c.name, "".join(c.arguments)) for c in self._calls]

    def _take_call(self, position: int, call: Any) -> None:
        index = getattr(call, "index", None)
        key = index if isinstance(index, int) else position
        call_id = str(getattr(call, "id", None) or "")
        parts = self._open.get(key)
        # A new id under an index already taken is a new call: some providers number every call 0.
        if parts is None or (call_id and parts.id and call_id != parts.id):
            parts = self._open[key] = _CallParts()
            self._calls.append(parts)
        if call_id and not parts.id:
            parts.id = call_id
        function = getattr(call, "function", None)
        name = getattr(function, "name", None)
        if name and not parts.name:
            parts.name = str(name)
        arguments = getattr(function, "arguments", None)
        if isinstance(arguments, str) and arguments:
            parts.arguments.append(arguments)

    def _take_usage(self, usage: Any) -> None:
        if usage is None:
            return
        for key in USAGE_KEYS:
            value = usage.get(key) if isinstance(usage, dict) else getattr(usage, key, None)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] = value
