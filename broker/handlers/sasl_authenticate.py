"""SaslAuthenticate · v0-2 · one step of the SASL exchange chosen by SaslHandshake (KIP-152).

Behaviour: the client's token goes to the connection's mechanism (broker/security/sasl.py) and its answer
comes back in auth_bytes; once the mechanism completes, the connection is authenticated as its principal.
A failed step answers SASL_AUTHENTICATION_FAILED with the mechanism's message (which never says whether the
user exists), nothing else changes, and the connection is closed after the answer. A raw token (after
SaslHandshake v0) that fails closes the connection without an answer, as Kafka does.
Version notes: v1+ session_lifetime_ms, always 0 (no re-authentication, KIP-368).
Logs: a principal's first login on a listener at INFO (which users this process has seen where), every later
one at DEBUG (a login per connection is routine).
Skipped: session re-authentication.
"""

from __future__ import annotations

import logging
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, CloseConnection, RequestContext, handles
from epoch_broker.broker.security.sasl import AuthenticationFailed
from epoch_broker.broker.services import Services
from epoch_broker.protocol.connection import AuthState
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import sasl_authenticate

log = logging.getLogger(__name__)
_logged_in: set[tuple[str, str]] = set()  # (listener, principal) seen by this process: their first login is INFO


@handles(sasl_authenticate.API, "0-2", roles=(BROKER, CONTROLLER))
def handle(context: RequestContext[Services], request: Any) -> Any:
    connection = context.connection
    assert connection is not None
    if connection.auth_state is not AuthState.AUTHENTICATE:  # not a SASL listener, or authenticated already
        return sasl_authenticate.RESPONSE.cls(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                                              error_message="this connection is not authenticating",
                                              session_lifetime_ms=0)
    raw = connection.raw_tokens
    try:
        challenge = connection.authenticate(request.auth_bytes)
    except AuthenticationFailed as exc:
        connection.authentication_failed()
        log.warning("SASL authentication of %s on %s failed: %s", context.peer, context.listener, exc)
        if raw:
            raise CloseConnection(f"SASL authentication failed: {exc}") from None
        return sasl_authenticate.RESPONSE.cls(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                              error_message=str(exc), auth_bytes=b"", session_lifetime_ms=0)
    if connection.auth_state is AuthState.AUTHENTICATED:
        seen = (context.listener, str(connection.principal))
        level = logging.DEBUG if seen in _logged_in else logging.INFO
        _logged_in.add(seen)
        log.log(level, "%s authenticated as %s on %s", context.peer, connection.principal, context.listener)
    return sasl_authenticate.RESPONSE.cls(error_code=ErrorCode.NONE, error_message=None, auth_bytes=challenge,
                                          session_lifetime_ms=0)
