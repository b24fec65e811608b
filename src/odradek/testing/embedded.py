"""``EmbeddedBroker``: a real odradek broker on a background event loop, for tests.

The broker runs on its own thread with its own event loop, so synchronous clients
(confluent-kafka, kafka-python, kcat in a subprocess) and asyncio clients on another loop
(aiokafka) all reach it over loopback exactly as they would reach a remote broker::

    with EmbeddedBroker(tmp_path) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

Every listener binds an ephemeral port unless ``listeners`` says otherwise;
``bootstrap_servers`` reaches the first, ``bootstrap_servers_of(name)`` any of them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import uvloop

from odradek.protocol.api import ApiKey
from odradek.protocol.framing import Request
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig
from odradek.security.principal import ANONYMOUS
from odradek.server.request_context import ConnectionContext

T = TypeVar("T")

STARTUP_TIMEOUT_SECONDS = 10


class EmbeddedBroker:
    def __init__(self, data_dir: Path, **configs: Any) -> None:
        """``configs`` are broker configs with '_' for '.', e.g. ``num_partitions=3``; a key
        that has a '.' is taken as it is (``**{"listener.name.sasl_ssl.ssl.client.auth": ...}``)."""
        self.data_dir = Path(data_dir)
        overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
        }
        overrides.update({k if "." in k else k.replace("_", "."): str(v)
                          for k, v in configs.items()})
        self._overrides = overrides
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.broker: Broker | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    def bootstrap_servers_of(self, listener_name: str) -> str:
        return f"127.0.0.1:{self.broker.bound_ports[listener_name]}"

    @property
    def port(self) -> int:
        return self.broker.port

    def handle(self, api_key: ApiKey, version: int, request: Any) -> Any:
        """What the broker's handler answers to ``request`` (a kio request of ``version``) from
        a client of the first listener: the response, an awaitable of it, or None. Call it on
        the broker's loop, from a coroutine given to :meth:`call`."""
        config = self.broker.config
        listener = config.listeners[0].name
        client = ConnectionContext(listener, config.listener_security_protocol_map[listener],
                                   ANONYMOUS, ("127.0.0.1", 0))
        return self.broker.dispatcher.handle(Request(api_key, version, 1, "test", request),
                                             client, 0)

    def start(self) -> EmbeddedBroker:
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="odradek-broker",
                                        daemon=True)
        self._thread.start()
        config = BrokerConfig.load(None, self._overrides)
        self.broker = Broker(config)
        self.call(self.broker.start())
        return self

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine on the broker's loop and returns its result."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(STARTUP_TIMEOUT_SECONDS)

    def stop(self) -> None:
        if self._loop is None:
            return
        try:
            self.call(self.broker.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            self._loop = None

    def restart(self) -> EmbeddedBroker:
        """Stops cleanly and starts again on the same data directory (a new port)."""
        self.stop()
        return self.start()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
