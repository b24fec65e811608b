"""Coordinators: the group coordinator (``group``, classic protocol) and, later, the
transaction coordinator. Their state machines are tables and do no I/O."""
