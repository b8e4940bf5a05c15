"""SaslHandshake · v0-1 · choose the SASL mechanism of this connection.

Behaviour: the connection's SASL state decides (protocol/connection.py): on a SASL listener, before
authentication, an enabled mechanism is accepted (NONE) and the exchange begins; any other answers
UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection is closed after the answer. On a listener
without SASL, or after authentication (re-authentication, KIP-368, is not supported): ILLEGAL_SASL_STATE.
Version notes: v0 means the tokens that follow are raw (size-prefixed, no Kafka header); v1 means they come
in SaslAuthenticate requests.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import sasl_handshake


@handles(sasl_handshake.API, "0-1", roles=(BROKER, CONTROLLER))
def handle(context: RequestContext[Services], request: Any) -> Any:
    connection = context.connection
    assert connection is not None
    error = connection.handshake(request.mechanism, context.api_version)
    if error is ErrorCode.ILLEGAL_SASL_STATE and connection.sasl is not None:
        connection.authentication_failed()  # a second handshake on an authenticated connection
    return sasl_handshake.RESPONSE.cls(error_code=error, mechanisms=connection.mechanisms)
