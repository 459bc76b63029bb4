"""The running bot (``bot.py run`` and ``chat``).

* :mod:`kith.app.wiring`: every part built from the settings (:func:`kith.app.wiring.build_app`).
* :mod:`kith.app.lifecycle`: the built app's life: start serving on its channels, stop, close, and run with
  operator commands served meanwhile (:class:`kith.app.lifecycle.App`).
* :mod:`kith.app.run`: the two commands around it: the data directory's lock, signals, the model process
  started early, the terminal chat's log file (:mod:`kith.app.logs`).
* :mod:`kith.app.model_start`: the model's child process, made and started as early as possible.
* :mod:`kith.app.schema`: every feature's tables, gathered and created.
* :mod:`kith.app.person_data`: everything kept about a person, gathered; :mod:`kith.app.person_export` the
  person's export document over it.

Nothing is imported here: ``run`` and ``chat`` import the wiring (and with it Chroma and every part) on a
thread while the model process starts.
"""
