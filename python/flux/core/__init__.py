"""Core of the client: messages, the handle, futures and watchers."""
