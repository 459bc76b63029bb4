"""Channels translate platform events into the core's types and back; they know nothing of memory or the LLM.

* :mod:`channels.telegram`, :mod:`channels.discord`, :mod:`channels.slack`: one package per platform, each with
  its channel, the pure translation of its events and its settings section and Markdown dialect.
* :mod:`channels.terminal`: a conversation on standard input and output (``kith chat``).
* :mod:`channels.markdown`: Markdown parsed once, emitted in a platform's dialect, cut to its length limit.
* :mod:`channels.lanes`: each chat's events handled in arrival order, other chats never waiting.
* :mod:`channels.http`: the small HTTP server for pushed events (Telegram webhooks, Slack HTTP events).
* :mod:`channels.downloads`: a file's body read within a size cap (Discord's and Slack's attachments).
"""
