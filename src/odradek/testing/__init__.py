"""Test support: a real broker in-process (``EmbeddedBroker``) and the pytest plugin."""

from odradek.testing.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
