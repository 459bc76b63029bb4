"""The conversation: from an inbound message to the reply, the same for every channel.

* :mod:`conversation.router`: intake and turns wired together, what a channel hands its messages to.
* :mod:`conversation.intake`: the steps every message takes in (admission, rate limit, notices, debounce).
* :mod:`conversation.keeping`: when a message enters and leaves the inbox.
* :mod:`conversation.debounce`: a burst of quick messages from one person becomes one turn.
* :mod:`conversation.typing_indicator`: the typing indicator shown while the model thinks.
* :mod:`conversation.core`: the turn itself, one message in and one reply out, the same for every channel.
* :mod:`conversation.context`: the bounded prompt, each part within its budget;
  :mod:`conversation.history_window` each thread's recent window; :mod:`conversation.summarizer` the rolling
  summary of a thread's older part.
* :mod:`conversation.chat_commands`: commands answered without the model; :mod:`conversation.memory_commands`
  a person's memory controls in chat; :mod:`conversation.linking` one person across platforms.
"""
