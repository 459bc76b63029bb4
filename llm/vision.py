"""Images in a chat request, OpenAI's way (litellm maps it to each provider that sees): the turn's text, then each
image as a data URL. Nothing else of kith builds this shape."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ground.types import SeenImage


def with_images(text: str, images: Sequence[SeenImage]) -> str | list[dict[str, Any]]:
    """A user message's ``content``: ``text`` alone when there is no image, else its text part and image parts."""
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for image in images:
        url = f"data:{image.mime or 'image/jpeg'};base64,{base64.b64encode(image.data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts
