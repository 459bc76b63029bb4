"""The heartbeat: kith's own schedule inside the bot process.

* :mod:`heartbeat.scheduler`: APScheduler with its jobs in the relational store, and the runner they call.
* :mod:`heartbeat.service`: the heartbeat's parts built and wired together (:class:`~heartbeat.service.Heartbeat`).
* :mod:`heartbeat.consolidation`: each night, yesterday's transcripts become curated memory, from receipts only.
* :mod:`heartbeat.due`: what is due for whom (a goal's date, a lapsing horizon, a conflict question).
* :mod:`heartbeat.check_ins`: the proactive turns that write to a person with something due.
* :mod:`heartbeat.decay`: each week, lapsed and stale memories retired by an end date, never deleted.
* :mod:`heartbeat.memory_scan`: the cross-person reads of the memory store the sweeps need.
* :mod:`heartbeat.runs`: the log of scheduled runs; :mod:`heartbeat.schema` gathers the heartbeat's tables.
* :mod:`heartbeat.settings`: the ``[heartbeat]`` settings checked, active hours and retry delays.

Goals are memory's (:mod:`memory.goals`): the heartbeat follows up on the due ones.
"""
