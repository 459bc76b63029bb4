"""``bot.py setup``: the first-run wizard.

* :mod:`kith.setup.wizard`: the dialogue: the model, the platforms, then the config and its ``.env`` written.
* :mod:`kith.setup.checks`: each answer checked before it is kept (a model call, a platform token).
* :mod:`kith.setup.files`: the config file and the ``.env`` beside it, planned and written.
"""
