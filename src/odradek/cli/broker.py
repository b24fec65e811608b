"""``odradek broker``: run one broker on the embedded default or from server.properties."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from odradek.cli.errors import fail
from odradek.server.config import BrokerConfig, ConfigError

# The embedded default: one broker on loopback, data in ./data, nothing else to run.
EMBEDDED_DEFAULTS = {"listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "data"}


def broker(
    config: Annotated[
        Optional[Path],
        typer.Option("--config", "-c", help="A Kafka server.properties file.", exists=True,
                     dir_okay=False, readable=True),
    ] = None,
    overrides: Annotated[
        Optional[list[str]],
        typer.Option("--set", "-s", help="Override one config: key=value (repeatable)."),
    ] = None,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
) -> None:
    """Start a broker. Without --config: 127.0.0.1:9092, data in ./data, local metadata."""
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    pairs = {} if config else dict(EMBEDDED_DEFAULTS)
    for item in overrides or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--set takes key=value, got {item!r}")
        pairs[key.strip()] = value
    try:
        broker_config = BrokerConfig.load(config, pairs)
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}")
    except OSError as exc:
        fail(f"cannot read {config}: {exc.strerror}")
    from odradek.server.runner import run_broker

    try:
        run_broker(broker_config)
    except ConfigError as exc:  # a listener this broker cannot serve
        fail(f"invalid configuration: {exc}")
    except OSError as exc:
        fail(f"broker failed: {exc}")
