"""The memory room: a local web page the running bot serves, where the operator reads and tends every person's
memory (``[web] enabled``; docs/web.md).

* ``door``: single-use login tokens, sessions and each session's form token (pure).
* ``rules``: the security headers, paging, and which memories a page may show (pure).
* ``views``: what each page shows, read through the bot's own parts.
* ``actions``: what the page changes, through the operator commands' bodies and the person's own controls.
* ``routes``: the Starlette routes, the Jinja2 templates and the guard (a session for every page, a form token for
  every post).
* ``server``: uvicorn on the bot's own event loop, started beside the control channel.
* ``url_cli``: ``bot.py web url``, a new sign-in link from the running bot.

Starlette, Jinja2 and uvicorn are imported only when the page is on.
"""
