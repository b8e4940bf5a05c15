"""DescribeUserScramCredentials · v0 · which SCRAM mechanisms (and iteration counts) each user has (KIP-554).

Behaviour: needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). No users (null or empty):
every user with a credential. A named user without one: RESOURCE_NOT_FOUND; a user named twice:
DUPLICATE_RESOURCE. Answered from this process's metadata; the users of the JAAS configs (which may log in with
SCRAM too, broker/security/listeners.py) are listed like the others. Never a salt or a key.
Skipped: nothing.
"""

from __future__ import annotations

import collections
from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.security.wire import SCRAM_MECHANISM_CODES
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import describe_user_scram_credentials as messages

Response = messages.RESPONSE.cls
Result = messages.RESPONSE.DescribeUserScramCredentialsResult
CredentialInfo = messages.RESPONSE.CredentialInfo


@handles(messages.API, "0", roles=(BROKER, CONTROLLER))
def handle(context: RequestContext[Services], request: Any) -> Any:
    if not context.authorized(AclOperation.DESCRIBE):
        return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[],
                        error_message=f"{context.principal} may not DESCRIBE the cluster")
    store = context.services.metadata.credentials
    named = [user.name for user in request.users or []]
    counts = collections.Counter(named)
    results = []
    for user in dict.fromkeys(named) if named else store.scram_users():
        credentials = store.scram_credentials(user)
        if counts[user] > 1:
            results.append(Result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE, credential_infos=[],
                                  error_message=f"user {user} is named more than once"))
        elif not credentials:
            results.append(Result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND, credential_infos=[],
                                  error_message=f"user {user} has no SCRAM credential"))
        else:
            results.append(Result(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=[
                CredentialInfo(mechanism=SCRAM_MECHANISM_CODES[mechanism], iterations=credential.iterations)
                for mechanism, credential in sorted(credentials.items())]))
    return Response(error_code=ErrorCode.NONE, error_message=None, results=results)
