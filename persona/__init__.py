"""The companion's persona: its card, and the model it speaks through (litellm)."""
