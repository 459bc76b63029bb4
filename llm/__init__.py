"""The language model, behind one door.

* :mod:`llm.client`: :class:`~llm.client.LLMClient`, every call to the model, with timeouts, bounded retries and
  fallback models.
* :mod:`llm.process` and :mod:`llm.worker`: litellm in a child process of its own (loading it takes seconds),
  the parent's side and the child's.
* :mod:`llm.probe`: one real call over plain HTTP, for ``doctor`` and ``setup``, without litellm.
"""
