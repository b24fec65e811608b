"""Command-line arguments shared by the client commands: where the brokers are, librdkafka
properties, and the ``key=value`` syntax that -X, --config, --set and --header all use."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from odradek.cli.errors import fail

DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"

BootstrapServers = Annotated[
    str,
    typer.Option(
        "--bootstrap-server", "-b", envvar="ODRADEK_BOOTSTRAP_SERVERS", metavar="HOST:PORT[,...]",
        help="Brokers to bootstrap from.",
    ),
]
ClientProperties = Annotated[
    Optional[list[str]],
    typer.Option(
        "--command-config", "-X", metavar="KEY=VALUE",
        help="A librdkafka property, e.g. -X security.protocol=SSL (repeatable). "
             "librdkafka logs only critical messages unless -X log_level=7 is given.",
    ),
]


def key_value_pairs(items: list[str] | None, option: str) -> list[tuple[str, str]]:
    """Splits each ``key=value`` at its first '='; the value may be empty or contain '='.

    A list rather than a dict because record headers may repeat a key."""
    pairs = []
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"{option} takes key=value, got {item!r}")
        pairs.append((key.strip(), value))
    return pairs
