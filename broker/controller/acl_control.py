"""ACL bindings (Kafka's AclControlManager): CreateAcls and DeleteAcls as AccessControlEntryRecord and
RemoveAccessControlEntryRecord. The image's Authorizer holds the bindings; who is a super user is the process's
config.

Rules:
- The bindings are a set: creating an existing binding is a success that writes nothing, and a binding two
  filters of one request match is deleted once.
- A binding or filter that does not validate fails alone (INVALID_REQUEST); the others of the request go ahead,
  in one commit.
"""

from __future__ import annotations

from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from epoch_broker.broker.security.acl import AclBinding, AclBindingFilter, validate_binding, validate_filter
from epoch_broker.protocol.errors import ErrorCode


class AclControlManager:
    def __init__(self, image: MetadataCache) -> None:
        self.image = image

    def create_acls(self, bindings: list[AclBinding]) -> ControllerResult[list[tuple[ErrorCode, str | None]]]:
        """One result per binding."""
        results: list[tuple[ErrorCode, str | None]] = []
        created: dict[AclBinding, None] = {}
        for binding in bindings:
            if (problem := validate_binding(binding)) is not None:
                results.append((ErrorCode.INVALID_REQUEST, problem))
                continue
            if binding not in self.image.acls:
                created[binding] = None
            results.append((ErrorCode.NONE, None))
        return ControllerResult([AccessControlEntryRecord(binding.to_dict()) for binding in created], results,
                                (f"created {len(created)} ACL bindings",) if created else ())

    def delete_acls(self, filters: list[AclBindingFilter]
                    ) -> ControllerResult[list[tuple[ErrorCode, str | None, list[AclBinding]]]]:
        """One result per filter, with the bindings it matched."""
        results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
        deleted: dict[AclBinding, None] = {}
        for binding_filter in filters:
            if (problem := validate_filter(binding_filter)) is not None:
                results.append((ErrorCode.INVALID_REQUEST, problem, []))
                continue
            matched = [binding for binding in self.image.acls if binding_filter.matches(binding)]
            deleted.update(dict.fromkeys(matched))
            results.append((ErrorCode.NONE, None, matched))
        return ControllerResult([RemoveAccessControlEntryRecord(binding.to_dict()) for binding in deleted], results,
                                (f"deleted {len(deleted)} ACL bindings",) if deleted else ())
