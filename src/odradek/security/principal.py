"""``KafkaPrincipal``: who a client is, as authorization and quotas see it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who a client is ("User:alice"): a type and a name, as in Kafka's ``KafkaPrincipal``."""

    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``SecurityUtils.parseKafkaPrincipal``: "User:alice" (the name may hold colons)."""
        type_, separator, name = text.partition(":")
        if not separator or not type_ or not name:
            raise ValueError(f"expected a string in format principalType:principalName but "
                             f"got {text}")
        return cls(type_, name)


USER_TYPE = "User"

# Kafka's KafkaPrincipal.ANONYMOUS: the principal of every client of a listener that
# authenticates nobody (PLAINTEXT, or SSL without a client certificate).
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
