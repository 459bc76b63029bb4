"""Slack: the Socket Mode / HTTP Events channel, its payload translation and its mrkdwn rendering."""

from channels.slack.channel import SlackChannel, check_token

__all__ = ["SlackChannel", "check_token"]
