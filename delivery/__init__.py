"""Delivery: messages in and out kept durably, so a crash loses no message and sends no reply twice.

* :mod:`delivery.inbound`: the journal of platform events already taken in (a redelivery is harmless), and the
  channels' persisted cursors.
* :mod:`delivery.inbox`: the messages taken in and not yet answered, taken up again after a restart.
* :mod:`delivery.outbox`: every reply written here before any attempt to send it.
* :mod:`delivery.posting`: the one way to post a message: into the outbox within a transaction, then to the worker.
* :mod:`delivery.worker`: the outbox delivered in order within a chat, concurrently across chats, with retries.
* :mod:`delivery.retention`: the journal and the delivered outbox pruned on a schedule.

What a message looks like on each platform is the channels' (:mod:`channels.markdown`); when a message enters
and leaves the inbox is the conversation's (:mod:`conversation.keeping`).
"""
