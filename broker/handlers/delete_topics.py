"""DeleteTopics · v0-6 · delete topics through the controller; their logs are removed on every broker.

Behaviour: by name (v0-5 topic_names, v6 topics[].name) or by id (v6 topics[].topic_id, UNKNOWN_TOPIC_ID when
unknown); UNKNOWN_TOPIC_OR_PARTITION for an unknown name. Authorization, as Kafka's controller decides it: DELETE
on the cluster allows every topic; else a topic named needs DESCRIBE (checked before its existence) and DELETE on
it, a topic named by id DELETE, and is answered without its name unless DESCRIBE is allowed too; refusals are
TOPIC_AUTHORIZATION_FAILED and delete nothing.
Version notes: v5+ error_message, v6 topic ids in the answer.
Skipped: timeout_ms (deletion completes before the answer); Kafka shuffles the answers, here they keep the
request's order.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.network.dispatch import BROKER, CONTROLLER, RequestContext, handles
from epoch_broker.broker.security.acl import AclOperation, ResourceType
from epoch_broker.broker.security.authorization import authorized_names
from epoch_broker.broker.services import Services
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import delete_topics

Response = delete_topics.RESPONSE.cls
Result = delete_topics.RESPONSE.DeletableTopicResult
NO_ID = bytes(16)


@handles(delete_topics.API, "0-6", roles=(BROKER, CONTROLLER))
async def handle(context: RequestContext[Services], request: Any) -> Any:
    if context.api_version >= 6:
        wanted: list[tuple[str | None, bytes | None]] = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    refused = _refusals(context, wanted)
    to_delete = [entry for index, entry in enumerate(wanted) if index not in refused]
    results = iter(await context.services.channel.delete_topics(to_delete) if to_delete else ())
    answers = [refused[index] if index in refused else next(results) for index in range(len(wanted))]
    return Response(responses=[
        Result(name=name, topic_id=topic_id, error_code=error,
               error_message=None if error == ErrorCode.NONE else error.name)
        for name, topic_id, error in answers
    ])


def _refusals(context: RequestContext[Services], wanted: list[tuple[str | None, bytes | None]]
              ) -> dict[int, tuple[str | None, bytes, ErrorCode]]:
    """Request index -> the answer refusing it, for the entries the principal may not delete."""
    topics_by_id = context.services.metadata.topics_by_id
    by_id = [bool(topic_id and topic_id != NO_ID) for _, topic_id in wanted]
    names = [(state.name if (state := topics_by_id.get(topic_id or NO_ID)) else None) if is_id else name
             for (name, topic_id), is_id in zip(wanted, by_id, strict=True)]
    known = [name for name in names if name is not None]
    describable = authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, known,
                                   or_cluster=AclOperation.DELETE)
    deletable = authorized_names(context, AclOperation.DELETE, ResourceType.TOPIC, known,
                                 or_cluster=AclOperation.DELETE)
    exists = context.services.metadata.topics_by_name
    refused = {}
    for index, ((_, topic_id), name, is_id) in enumerate(zip(wanted, names, by_id, strict=True)):
        if name is None or name in deletable:
            continue  # allowed, or an unknown id: the controller answers it
        if not is_id and name in describable and name not in exists:
            continue  # the controller answers UNKNOWN_TOPIC_OR_PARTITION: whoever may describe it may know that
        # named by id, the name is shown only to whom may describe the topic (its id is not secret)
        shown = name if not is_id or name in describable else None
        refused[index] = (shown, topic_id or NO_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return refused
