"""SCRAM credentials (Kafka's ScramControlManager, KIP-554): AlterUserScramCredentials as
UserScramCredentialRecord and RemoveUserScramCredentialRecord. The image's CredentialStore holds them.

Rules:
- An upsertion is (user, credential), or (user, why it is not one) when the request's values could not make one
  (UNACCEPTABLE_CREDENTIAL).
- A user named twice for one mechanism (DUPLICATE_RESOURCE), or a deletion of a credential that does not exist
  (RESOURCE_NOT_FOUND), fails that user; a user with any failure changes nothing, the others change in one commit.
- One answer per user, in the order the request first names them.
"""

from __future__ import annotations

from typing import Any

from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.image import MetadataCache
from epoch_broker.broker.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from epoch_broker.broker.security.sasl import ScramCredential
from epoch_broker.protocol.errors import ErrorCode


class ScramControlManager:
    def __init__(self, image: MetadataCache) -> None:
        self.image = image

    def alter_scram_credentials(self, deletions: list[tuple[str, str]],
                                upsertions: list[tuple[str, ScramCredential | str]]
                                ) -> ControllerResult[dict[str, tuple[ErrorCode, str | None]]]:
        """Per user, NONE or why not."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        seen: set[tuple[str, str]] = set()
        records: dict[str, list[Any]] = {}

        def fail(user: str, error: ErrorCode, message: str) -> None:
            results.setdefault(user, (error, message))

        for user, mechanism in deletions:
            if (user, mechanism) in seen:
                fail(user, ErrorCode.DUPLICATE_RESOURCE, f"a credential for {user} and {mechanism} appears twice")
            elif self.image.credentials.scram(user, mechanism) is None:
                fail(user, ErrorCode.RESOURCE_NOT_FOUND, f"no {mechanism} credential for user {user}")
            seen.add((user, mechanism))
            records.setdefault(user, []).append(RemoveUserScramCredentialRecord(user, mechanism))
        for user, credential in upsertions:
            if isinstance(credential, str):
                fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, credential)
                continue
            if (user, credential.mechanism) in seen:
                fail(user, ErrorCode.DUPLICATE_RESOURCE,
                     f"a credential for {user} and {credential.mechanism} appears twice")
            seen.add((user, credential.mechanism))
            records.setdefault(user, []).append(UserScramCredentialRecord(
                user, credential.mechanism, credential.salt, credential.stored_key, credential.server_key,
                credential.iterations))
        committed = [record for user, changes in records.items() if user not in results for record in changes]
        answers = {user: results.get(user, (ErrorCode.NONE, None)) for user in dict.fromkeys(
            [user for user, _ in deletions] + [user for user, _ in upsertions])}
        done = (f"altered {len(committed)} SCRAM credentials",) if committed else ()
        return ControllerResult(committed, answers, done)
