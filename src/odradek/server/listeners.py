"""Kafka's listener configs, read and checked as ``KafkaConfig`` does, with its messages.

``listeners`` names the sockets to bind (``NAME://host:port``), ``listener.security.protocol.map``
the security protocol of each name, ``advertised.listeners`` what clients of each listener are
told (matched by name; unset, the listeners themselves) and ``inter.broker.listener.name`` the
listener brokers use between themselves: by default the one named after
``security.inter.broker.protocol`` (PLAINTEXT). :class:`~odradek.server.config.BrokerConfig`
exposes the parsed values; this module holds the rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.server.config_defs import ConfigError, Endpoint, SecurityProtocol, csv_list

PROTOCOL_MAP = "listener.security.protocol.map"
INTER_BROKER_LISTENER_NAME = "inter.broker.listener.name"
INTER_BROKER_SECURITY_PROTOCOL = "security.inter.broker.protocol"


def security_protocol(name: str, config: str) -> SecurityProtocol:
    """``KafkaConfig.getSecurityProtocol``: ``SecurityProtocol.forName``, which upper-cases."""
    try:
        return SecurityProtocol(name.upper())
    except ValueError:
        raise ConfigError(f"Invalid security protocol `{name}` defined in {config}",
                          config) from None


def security_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``: listener name -> protocol. Set, it replaces
    Kafka's default map whole, so a listener named PLAINTEXT needs ``PLAINTEXT:PLAINTEXT``."""
    pairs = [entry.split(":") for entry in csv_list(value)]
    if any(len(pair) != 2 for pair in pairs):
        raise ConfigError.invalid_value(PROTOCOL_MAP, value, "Expected a list of NAME:PROTOCOL")
    return {listener.strip().upper(): security_protocol(protocol.strip(), PROTOCOL_MAP)
            for listener, protocol in pairs}


def inter_broker_listener_name(name: str | None, protocol: str, protocol_is_set: bool,
                               protocols: dict[str, SecurityProtocol]) -> str:
    """``KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol``'s listener name.

    ``protocol_is_set`` says whether ``security.inter.broker.protocol`` was given (Kafka looks
    at the original properties, not at the default)."""
    if name is None:
        return security_protocol(protocol, INTER_BROKER_SECURITY_PROTOCOL).value
    if protocol_is_set:
        raise ConfigError(f"Only one of {INTER_BROKER_LISTENER_NAME} and "
                          f"{INTER_BROKER_SECURITY_PROTOCOL} should be set.",
                          INTER_BROKER_LISTENER_NAME)
    name = name.upper()  # ListenerName.normalised
    if name not in protocols:
        raise ConfigError(f"Listener with name {name} defined in {INTER_BROKER_LISTENER_NAME} "
                          f"not found in {PROTOCOL_MAP}.", INTER_BROKER_LISTENER_NAME)
    return name


def check_listeners(listeners: Sequence[Endpoint], advertised: Sequence[Endpoint],
                    inter_broker: str) -> None:
    """``KafkaConfig.validateValues``' broker listener checks. Unique names and ports were
    checked when the lists were parsed."""
    names = [e.name for e in listeners]
    advertised_names = [e.name for e in advertised]
    if not advertised_names:
        raise ConfigError("There must be at least one broker advertised listener.",
                          "advertised.listeners")
    if inter_broker not in advertised_names:
        raise ConfigError(
            f"{INTER_BROKER_LISTENER_NAME} must be a listener name defined in "
            "advertised.listeners. The valid options based on currently configured listeners "
            f"are {','.join(advertised_names)}",
            INTER_BROKER_LISTENER_NAME,
        )
    if not set(advertised_names) <= set(names):
        raise ConfigError(
            "advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(advertised_names)}. The valid options based "
            f"on the current configuration are {','.join(names)}",
            "advertised.listeners",
        )
