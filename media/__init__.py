"""The files people send, read into words where kith can (issue #35's room).

Its contract: :meth:`media.reader.MediaReader.read` takes a message that carries attachments and gives back the
message as words (a voice note's transcript as its text, ``medium`` "voice"), or with photos to show a model that
sees for that turn only (``medium`` "photo", the caption its text), or one honest line to answer instead (too
long, too large, gone, no words), or the message as it came (nothing it can read: the intake's honest line for an
unreadable message stays). It fetches through the channel's own :class:`ground.types.AttachmentSource`, and
transcribes and asks whether the model sees through :class:`llm.client.LLMClient`; it keeps no file: what it
fetched lives in memory for the one call and is gone after it.

* :mod:`media.reader`: the reading itself, inside the turn (a failure fails the turn, which is tried again);
* :mod:`media.rules`: pure rules: which voice note is read, which images are shown, within which limits,
  and the honest lines.
"""
