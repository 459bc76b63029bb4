"""The shared core: types, settings, storage and the conversation loop every channel uses."""
