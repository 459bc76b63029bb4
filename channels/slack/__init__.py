"""Slack: the Socket Mode / HTTP Events channel, its payload translation and its mrkdwn rendering.

Import from the modules (``channels.slack.channel``, ``.settings``...): every command reads this package's
settings, and only the commands that connect may load the Slack SDK, so the package itself imports nothing.
"""
