"""AlterUserScramCredentials · v0 · create, replace and delete users' SCRAM credentials (KIP-554), stored by the
controller (never a password: the client sends the salt and the salted password).

Behaviour: needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every user otherwise). Per user:
UNACCEPTABLE_CREDENTIAL (an unknown mechanism, iterations outside 4096..16384, an empty salt, an empty
name), DUPLICATE_RESOURCE (a user and mechanism twice), RESOURCE_NOT_FOUND (deleting what does not exist);
a user with a failure changes nothing. A broker forwards to the controller and answers once its own metadata
has the change, so the next SCRAM login on it uses the new credential.
Skipped: nothing.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import alter_user_scram_credentials as messages

Result = messages.RESPONSE.AlterUserScramCredentialsResult


@handles(messages.API, "0", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    if not context.authorized(AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return messages.RESPONSE.cls(results=[
            Result(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=f"{context.principal} may not ALTER the cluster") for user in users])
    results = await context.services.channel.alter_scram_credentials(request)
    return messages.RESPONSE.cls(results=[Result(user=user, error_code=error, error_message=message)
                                          for user, (error, message) in results.items()])
