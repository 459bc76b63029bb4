"""The files people send, read into words where kith can (issue #35's room).

Its contract: :meth:`media.reader.MediaReader.read` takes a message that carries attachments and gives back
either the message as words (a voice note's transcript as its text, ``medium`` "voice") or one honest line to
answer instead (too long, too large), or the message as it came (nothing it can read: the intake's honest line
for an unreadable message stays). It fetches through the channel's own :class:`ground.types.AttachmentSource`
and transcribes through :class:`llm.client.LLMClient`; it keeps no file: the audio lives in memory for the one
call and is gone after it. Which attachment is read and which limit applies are pure rules
(:mod:`media.voice_rules`).
"""
