"""DeleteTopics · v0-6 · delete topics through the controller; their logs are removed on every broker.

Behaviour: by name (v0-5 topic_names, v6 topics[].name) or by id (v6 topics[].topic_id, UNKNOWN_TOPIC_ID when
unknown); UNKNOWN_TOPIC_OR_PARTITION for an unknown name.
Version notes: v5+ error_message, v6 topic ids in the answer.
Skipped: timeout_ms (deletion completes before the answer).
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import delete_topics

Response = delete_topics.RESPONSE.cls
Result = delete_topics.RESPONSE.DeletableTopicResult


@handles(delete_topics.API, "0-6", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    if context.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = await context.services.channel.delete_topics(wanted)
    return Response(responses=[
        Result(name=name, topic_id=topic_id, error_code=error,
               error_message=None if error == ErrorCode.NONE else error.name)
        for name, topic_id, error in results
    ])
