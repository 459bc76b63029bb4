"""The control channel: operator commands run by the bot that owns the data directory.

A running bot owns every write to its data directory (see :mod:`ground.instance`). Each operator command
(``memory …``, ``people …``, ``pairing …``, ``consolidate``, ``heartbeat``, ``decay``, doctor's store
checks) is one async body over the already-open parts (:mod:`kith.control.operations`); only the host
differs:

* a bot is running: the command's process parses its arguments, asks any confirmation in its own
  terminal, and sends the parsed request over the control socket (:mod:`kith.control.client`); the
  bot runs the body with its own database, memory store and heartbeat (:mod:`kith.control.server`)
  and streams the output, progress bar and exit code back. That process imports neither litellm nor
  Chroma;
* no bot is running: the command takes the data directory's lock and runs the same body over parts
  it opens itself (:mod:`kith.control.local`), so two embedded Chroma clients never share a directory.

The wire (:mod:`kith.control.frames`): one JSON request line, then newline-delimited JSON frames
``{"out": text}``, ``{"err": text}``, ``{"data": value}`` and finally ``{"exit": code}``. The socket is
``<data_dir>/control.sock``, mode 0600; where there is no AF_UNIX (Windows), or the path is too long for
one, a loopback TCP port whose per-start token is in ``<data_dir>/control.token``, mode 0600
(:mod:`kith.control.endpoint`).
"""
