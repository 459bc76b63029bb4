"""Delivery: turning the model's Markdown into each platform's markup, cut to each platform's limits."""
