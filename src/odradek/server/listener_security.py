"""``ListenerSecurity``: what a listener's security protocol asks of its connections.

=================  ===========  =================================================
protocol           TLS          principal
=================  ===========  =================================================
PLAINTEXT          no           ``User:ANONYMOUS``
SSL                yes          from the client's certificate (mutual TLS), through
                                ``ssl.principal.mapping.rules``; else ANONYMOUS
SASL_PLAINTEXT     no           the SASL user (``SaslAuthenticator``)
SASL_SSL           yes          the SASL user
=================  ===========  =================================================

Everything is read from the broker's config for the listener (``listener.name.<listener>.*``
first), and read again by :meth:`ListenerSecurity.reconfigure` when a dynamic config changes:
a renewed certificate or a new PLAIN user applies to connections made afterwards.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from functools import partial

from odradek.client.connection import ClientSecurity
from odradek.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from odradek.security.sasl import (
    PLAIN,
    PlainSaslServer,
    SaslServer,
    ScramSaslServer,
    parse_jaas_config,
)
from odradek.security.scram import MECHANISM_NAMES, ScramCredential, ScramMechanism
from odradek.security.ssl_principal import SslPrincipalMapper, distinguished_name
from odradek.security.tls import (
    ReloadableSslContext,
    SslConfigError,
    client_context,
    server_context,
)
from odradek.server.authenticator import SaslAuthenticator
from odradek.server.config import BrokerConfig, ConfigError, SecurityProtocol

# Looks up a user's SCRAM credential in the metadata store.
CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]

_TLS_PROTOCOLS = frozenset({SecurityProtocol.SSL, SecurityProtocol.SASL_SSL})
_SASL_PROTOCOLS = frozenset({SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL})
SERVED_MECHANISMS = frozenset({PLAIN, *MECHANISM_NAMES})


class ListenerSecurity:
    def __init__(self, config: BrokerConfig, name: str, protocol: SecurityProtocol,
                 credentials: CredentialLookup) -> None:
        """Raises ConfigError, naming the config, when the listener cannot be served."""
        self.name = name
        self.protocol = protocol
        self._config = config
        self._credentials = credentials
        self.ssl_context: ReloadableSslContext | None = None
        self._principal_mapper: SslPrincipalMapper | None = None
        self._mechanisms: dict[str, Callable[[], SaslServer]] = {}
        self.reconfigure()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in _TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in _SASL_PROTOCOLS

    def reconfigure(self) -> None:
        """Reads the listener's configs again; on a ConfigError the previous ones stay."""
        context = self._tls_context() if self.uses_tls else None
        mapper = self._ssl_principal_mapper() if self.protocol is SecurityProtocol.SSL else None
        mechanisms = self._sasl_mechanisms() if self.uses_sasl else {}
        if context is not None:
            if self.ssl_context is None:
                self.ssl_context = ReloadableSslContext(context)
            else:
                self.ssl_context.replace(context)
        self._principal_mapper = mapper
        self._mechanisms = mechanisms

    def _get(self, name: str, mechanism: str | None = None) -> object:
        return self._config.listener_config(self.name, name, mechanism)

    # -- TLS ---------------------------------------------------------------------------

    def _tls_context(self) -> ssl.SSLContext:
        try:
            return server_context(self._get)
        except SslConfigError as exc:
            raise ConfigError(f"Listener {self.name}: {exc}", exc.name) from None

    def _ssl_principal_mapper(self) -> SslPrincipalMapper:
        try:
            return SslPrincipalMapper(self._get("ssl.principal.mapping.rules"))
        except ValueError as exc:
            raise ConfigError(f"Listener {self.name}: ssl.principal.mapping.rules: {exc}",
                              "ssl.principal.mapping.rules") from None

    def tls_principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """The principal of a connection of an SSL listener: its certificate's mapped name,
        or ANONYMOUS without one. Raises NoMatchingRule when no rule applies."""
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        if not certificate or self._principal_mapper is None:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE,
                              self._principal_mapper.name(distinguished_name(certificate)))

    # -- SASL --------------------------------------------------------------------------

    def _sasl_mechanisms(self) -> dict[str, Callable[[], SaslServer]]:
        enabled = self._get("sasl.enabled.mechanisms")
        unserved = [m for m in enabled if m not in SERVED_MECHANISMS]
        if unserved or not enabled:
            raise ConfigError(
                f"Listener {self.name}: sasl.enabled.mechanisms={','.join(enabled)}: odradek "
                f"serves {', '.join(sorted(SERVED_MECHANISMS))}"
                + (f", not {', '.join(unserved)}" if unserved else ""),
                "sasl.enabled.mechanisms")
        mechanisms: dict[str, Callable[[], SaslServer]] = {}
        for mechanism in enabled:
            if mechanism == PLAIN:
                mechanisms[mechanism] = partial(PlainSaslServer, self._plain_users())
            else:
                mechanisms[mechanism] = partial(ScramSaslServer,
                                                ScramMechanism.from_name(mechanism),
                                                self._credentials)
        return mechanisms

    def _plain_users(self) -> dict[str, str]:
        config = f"listener.name.{self.name.lower()}.plain.sasl.jaas.config"
        jaas = self._get("sasl.jaas.config", PLAIN)
        if jaas is None:
            raise ConfigError(f"Listener {self.name} enables PLAIN but has no users: set "
                              f"{config} (PlainLoginModule with user_<name>=\"<password>\")",
                              config)
        try:
            modules = parse_jaas_config(jaas)
        except ValueError as exc:
            raise ConfigError(f"{config}: {exc}", config) from None
        return {user: password for module in modules
                for user, password in module.plain_users().items()}

    def authenticator(self) -> SaslAuthenticator | None:
        """A new connection's SASL exchange; None on a listener without SASL."""
        if not self.uses_sasl:
            return None
        return SaslAuthenticator(
            dict(self._mechanisms),
            reauth_ms=self._config.get("connections.max.reauth.ms"),
            failed_delay_ms=self._config.get("connection.failed.authentication.delay.ms"),
            clock=time.monotonic)


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """How this broker reaches the others' inter-broker listener (``inter.broker.listener.name``)
    as their client: TLS with the listener's ``ssl.*`` configs (its keystore is this broker's
    certificate), SASL with ``sasl.mechanism.inter.broker.protocol`` as the ``username`` and
    ``password`` of that mechanism's JAAS config on the listener, as Kafka's brokers do.
    None for a PLAINTEXT inter-broker listener."""
    name = config.inter_broker_listener_name
    protocol = config.listener_security_protocol_map[name]
    if protocol is SecurityProtocol.PLAINTEXT:
        return None
    context = None
    if protocol in _TLS_PROTOCOLS:
        try:
            context = client_context(lambda key: config.listener_config(name, key))
        except SslConfigError as exc:
            raise ConfigError(f"Inter-broker listener {name}: {exc}", exc.name) from None
    if protocol not in _SASL_PROTOCOLS:
        return ClientSecurity(ssl_context=context)
    mechanism = config.get("sasl.mechanism.inter.broker.protocol")
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if mechanism not in SERVED_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism}: odradek's "
                          f"brokers authenticate to each other with "
                          f"{', '.join(sorted(SERVED_MECHANISMS))}",
                          "sasl.mechanism.inter.broker.protocol")
    jaas = config.listener_config(name, "sasl.jaas.config", mechanism)
    options = {}
    if jaas is not None:
        try:
            options = parse_jaas_config(jaas)[0].options
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}", key) from None
    if "username" not in options or "password" not in options:
        raise ConfigError(f"The inter-broker listener {name} authenticates with {mechanism}: "
                          f"set {key} with the broker's username and password", key)
    return ClientSecurity(context, mechanism, options["username"], options["password"])
