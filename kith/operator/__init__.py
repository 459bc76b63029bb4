"""The operator's commands, each an argument parser for ``bot.py`` and async bodies that run in the running bot
or, with none, under the data directory's lock (:mod:`kith.control`).

* :mod:`kith.operator.memory_cli`: ``memory list|show|search|label|forget|export|reembed|undo-decay``.
* :mod:`kith.operator.people_cli`: ``people list|link|unlink``.
* :mod:`kith.operator.graph_cli`: ``graph show|draw|unmerge|merge``: one person's graph, read, drawn, corrected.
* :mod:`kith.operator.policy_cli`: ``pairing list|approve|revoke``.
* :mod:`kith.operator.heartbeat_cli`: ``consolidate``, ``heartbeat``, ``decay``: a scheduled job run once, now.
* :mod:`kith.operator.doctor`: ``doctor``; :mod:`kith.operator.store_checks` its checks of the stores.
* :mod:`kith.operator.progress`: a long command's progress on standard error.
* :mod:`kith.operator.hints`: one line saying what to set when the model cannot be reached.
"""
