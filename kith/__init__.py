"""The wiring: the only package that knows every other one and the platforms, grouped by job.

* :mod:`kith.app`: the running bot: its parts built from the settings (wiring), its life (start, stop, run
  until stopped), every table and everything kept about a person gathered, and ``bot.py run`` and ``chat``.
* :mod:`kith.operator`: the operator's commands (``memory``, ``people``, ``pairing``, ``consolidate``,
  ``heartbeat``, ``decay``, ``doctor``) and what they share (progress, hints, the store checks).
* :mod:`kith.setup`: ``bot.py setup``, the first-run wizard: its dialogue, its checks, the files it writes.
* :mod:`kith.control`: the control channel an operator command reaches a running bot on: its socket, and on a
  shared PostgreSQL the command rows another machine leaves for the active bot.
* :mod:`kith.web`: the memory room, the local web page a running bot serves (``[web]``), its actions run through
  the same operations as the control channel's.
* :mod:`kith.settings`: the settings file with each platform's section (:class:`kith.settings.AppSettings`),
  as every command loads it.
"""
