"""The listeners of a process, secured as its config says: what the server binds, who may log in, and how this
process itself connects to other brokers and to the controller.

Rules:
- Every listener in `listeners` is bound (`bind_listeners`), each with its security protocol from
  `listener.security.protocol.map`: PLAINTEXT, SSL (TLS, tls.py), SASL_PLAINTEXT, SASL_SSL (SASL with the
  listener's `sasl.enabled.mechanisms`, after TLS for SASL_SSL).
- Who may log in (`add_config_users`): the `user_<name>="<password>"` options of every listener's
  `listener.name.<listener>.<mechanism>.sasl.jaas.config`. They log in with PLAIN, and, derived at start, with
  SCRAM-SHA-256 and SCRAM-SHA-512 (a project extension: Kafka keeps SCRAM credentials only in its metadata,
  set with AlterUserScramCredentials, which is served too). Kafka keeps users per listener; here a process
  has one set of users for all its SASL listeners.
- With `cluster.secret`, the user `epoch-broker` logs in with it, and this process logs in to its peers' SASL
  listeners as that user with SCRAM-SHA-512 wherever no JAAS login is configured for the listener.
- This process's own logins (`client_security`): the inter-broker listener for replica fetchers, the first
  of `controller.listener.names` for the controller channel, with the protocol the map gives that name, TLS
  by tls.py's client context, and SASL with `sasl.mechanism.inter.broker.protocol` /
  `sasl.mechanism.controller.protocol` as the `username`/`password` of that listener's JAAS config for the
  mechanism.
- A JAAS config that does not parse is a start-up error naming its key.
- `Listener` (a listener's name, TLS context and SASL mechanisms) is declared here, below network/server.py
  which serves it: security/ does not import network/ (`bind_listeners` is handed the server).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from epoch_broker.broker.config import BROKER_USER, BrokerConfig, Endpoint, StartupError
from epoch_broker.broker.security import tls
from epoch_broker.broker.security.sasl import (
    PLAIN_LOGIN_MODULE,
    SCRAM_MECHANISMS,
    CredentialStore,
    ScramCredential,
    new_server,
    parse_jaas,
    parse_jaas_login,
    parse_jaas_users,
)
from epoch_broker.client.aio import PLAINTEXT, Security
from epoch_broker.protocol.connection import SaslMechanism

if TYPE_CHECKING:
    from epoch_broker.broker.network.server import KafkaServer

log = logging.getLogger(__name__)

JAAS_SUFFIX = ".sasl.jaas.config"
CLUSTER_SECRET_MECHANISM = "SCRAM-SHA-512"


@dataclasses.dataclass(frozen=True, slots=True)
class Listener:
    """What a connection on one listener needs: the listener's name, its TLS context, and the SASL mechanisms
    it requires (name -> a factory of one exchange; None when it requires none)."""

    name: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    sasl: Mapping[str, Callable[[], SaslMechanism]] | None = None


def _uses_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def _uses_sasl(protocol: str) -> bool:
    return protocol.startswith("SASL_")


def server_listener(config: BrokerConfig, name: str, credentials: CredentialStore) -> Listener:
    protocol = config.security_protocol(name)
    sasl = None
    if _uses_sasl(protocol):
        mechanisms = config.listener_setting(name, "sasl.enabled.mechanisms").split(",")
        sasl = {mechanism: functools.partial(new_server, mechanism, credentials) for mechanism in mechanisms}
    return Listener(name, tls.server_context(config, name) if _uses_tls(protocol) else None, sasl)


async def bind_listeners(server: KafkaServer, config: BrokerConfig, credentials: CredentialStore) -> BrokerConfig:
    """Bind every listener; returns the config with the kernel's port for each listener asked on port 0."""
    bound = []
    for endpoint in config.listeners:
        _, port = await server.start(endpoint.host, endpoint.port,
                                     server_listener(config, endpoint.listener, credentials))
        bound.append(Endpoint(endpoint.listener, endpoint.host, port))
        log.info("listener %s (%s) on %s:%d", endpoint.listener, config.security_protocol(endpoint.listener),
                 endpoint.host, port)
    return dataclasses.replace(config, listeners=tuple(bound))


def add_config_users(config: BrokerConfig, store: CredentialStore) -> None:
    """Add the users of the JAAS configs to `store` (the metadata's, which KIP-554 credentials fill too), and
    the brokers' own user when the cluster has a secret."""
    if config.cluster_secret:
        _add_user(store, BROKER_USER, config.cluster_secret)
    for key, value in config.listener_settings:
        if not key.endswith(JAAS_SUFFIX):
            continue
        try:
            if parse_jaas(value).login_module != PLAIN_LOGIN_MODULE:
                continue  # a ScramLoginModule entry: a login, no users
            users = parse_jaas_users(value)
        except ValueError as exc:
            raise StartupError(f"{key}: {exc}") from None
        for user, password in users.items():
            _add_user(store, user, password)


def _add_user(store: CredentialStore, user: str, password: str) -> None:
    store.set_password(user, password)
    for mechanism in SCRAM_MECHANISMS:
        store.set_scram(user, ScramCredential.from_password(mechanism, password))


def client_security(config: BrokerConfig, listener: str, mechanism: str) -> Security:
    """How this process logs in to a peer's `listener` (the inter-broker or the controller listener)."""
    protocol = config.security_protocol(listener)
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    context = tls.client_context(config, listener) if _uses_tls(protocol) else None
    if not _uses_sasl(protocol):
        return Security(context)
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}{JAAS_SUFFIX}"
    jaas = dict(config.listener_settings).get(key)
    if jaas is None and config.cluster_secret:  # the cluster's own login, never sent in the clear
        return Security(context, CLUSTER_SECRET_MECHANISM, BROKER_USER, config.cluster_secret)
    if jaas is None:
        raise StartupError(f"{key} is not set: this process cannot log in to {listener} ({protocol}) with "
                           f"{mechanism} (give it username=\"...\" password=\"...\")")
    try:
        username, password = parse_jaas_login(jaas)
    except ValueError as exc:
        raise StartupError(f"{key}: {exc}") from None
    return Security(context, mechanism, username, password)
