"""Share sessions (KIP-932, Kafka's ShareSessionCache): which partitions a share group member fetches from here;
and what ShareFetch and ShareAcknowledge both do with them (Kafka's SharePartitionManager: acknowledge, release).

A share consumer keeps one session per broker: ShareFetch with epoch 0 opens it with the partitions it lists,
each later request (epoch n, then n + 1, ...) adds the partitions it lists and drops its forgotten ones, and
epoch -1 closes it (the final request carries only acknowledgements). A fetch reads every partition of the
session, not only those the request names.

Rules:
- Epoch 0 with a session already open for the member replaces it: the old one's partitions are returned so the
  caller releases what the member still holds there (the client restarted its session).
- Epoch > 0 needs the session (SHARE_SESSION_NOT_FOUND) at that very epoch (INVALID_SHARE_SESSION_EPOCH); an
  accepted request moves the epoch on by one. Epoch -1 needs the session too, and removes it.
- A session belongs to the connection that opened it: when that connection closes, the session ends and the
  member's records are released at once (as Kafka 4.1 on), not when their locks expire.
- At most `max_sessions` sessions (Kafka's group.share.max.share.sessions): one more is SHARE_SESSION_LIMIT_REACHED.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epoch_broker.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from epoch_broker.broker.replica.replica_manager import ReplicaManager

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
TopicIdPartition = tuple[bytes, int]


@dataclass(eq=False, slots=True)
class ShareSession:
    group_id: str
    member_id: str
    peer: str = ""  # the connection that opened it
    epoch: int = 1  # the epoch the member's next request must carry
    partitions: list[TopicIdPartition] = field(default_factory=list)  # in the order they joined


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, group_id: str, member_id: str, peer: str = ""
             ) -> tuple[ErrorCode, ShareSession | None, list[TopicIdPartition]]:
        """Epoch 0: (NONE, the new session, the partitions of the session it replaced)."""
        replaced = self._sessions.pop((group_id, member_id), None)
        if len(self._sessions) >= self.max_sessions:
            if replaced is not None:
                self._sessions[(group_id, member_id)] = replaced
            return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None, []
        session = self._sessions[(group_id, member_id)] = ShareSession(group_id, member_id, peer)
        return ErrorCode.NONE, session, replaced.partitions if replaced is not None else []

    def next(self, group_id: str, member_id: str, epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        """A request at `epoch` (> 0 or -1) of an open session; an accepted final request removes it."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            del self._sessions[(group_id, member_id)]
            return ErrorCode.NONE, session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch += 1
        return ErrorCode.NONE, session


    def has_group(self, group_id: str) -> bool:
        """Whether any member of the group has a session here."""
        return any(key[0] == group_id for key in self._sessions)

    def disconnected(self, peer: str) -> list[ShareSession]:
        """The sessions of a connection that closed, removed."""
        gone = [key for key, session in self._sessions.items() if session.peer == peer]
        return [self._sessions.pop(key) for key in gone]


def update_partitions(session: ShareSession, added: list[TopicIdPartition],
                      forgotten: list[TopicIdPartition]) -> list[TopicIdPartition]:
    """Add the request's partitions and drop its forgotten ones; returns the ones dropped from the session."""
    dropped = [tp for tp in forgotten if tp in session.partitions]
    kept = [tp for tp in session.partitions if tp not in set(forgotten)]
    kept += [tp for tp in dict.fromkeys(added) if tp not in kept]
    session.partitions = kept
    return dropped


async def acknowledge(replicas: ReplicaManager, group_id: str, member_id: str, topic_id: bytes, index: int,
                      batches: Iterable[Any]) -> ErrorCode:
    """A member's AcknowledgementBatches for one partition, applied by the partition's leader here (answered
    once durable)."""
    partition = replicas.get_by_id(topic_id, index)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return await partition.share_acknowledge(
        group_id, member_id, [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches])


def release(replicas: ReplicaManager, group_id: str, member_id: str, partitions: Iterable[TopicIdPartition]) -> None:
    """The member's session no longer covers `partitions`: what it holds there becomes available again. When it
    was the group's last session here, those share-partitions are let go (`Partition.share_group_left`)."""
    last = not replicas.share_sessions.has_group(group_id)
    for topic_id, index in partitions:
        if (partition := replicas.get_by_id(topic_id, index)) is not None:
            partition.share_release_member(group_id, member_id)
            if last:
                partition.share_group_left(group_id)
