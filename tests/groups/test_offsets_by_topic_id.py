"""OffsetCommit and OffsetFetch v10 (Kafka 4.2, KIP-848): topics named by id both ways, over a broker's socket;
the offsets are the group's whatever version wrote or reads them, and an unknown id answers UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import uuid
from pathlib import Path

from epoch_broker import testing
from epoch_broker.client.blocking import BlockingKafkaClient
from epoch_broker.protocol.errors import ErrorCode
from epoch_broker.protocol.messages import find_coordinator, metadata, offset_commit, offset_fetch

C, F = offset_commit.REQUEST, offset_fetch.REQUEST


def test_offsets_committed_and_fetched_by_topic_id(tmp_path: Path) -> None:
    unknown = uuid.uuid4().bytes
    with (testing.broker(data_dir=tmp_path) as started,
          BlockingKafkaClient.connect(started.bootstrap_servers) as client):
        started.create_topic("orders", partitions=2)
        answer = client.request(metadata.API, 12, metadata.REQUEST.cls(
            topics=[metadata.REQUEST.MetadataRequestTopic(name="orders")]))
        topic_id = answer.topics[0].topic_id
        client.request(find_coordinator.API, 3, find_coordinator.REQUEST.cls(key="g"))

        committed = client.request(offset_commit.API, 10, C.cls(group_id="g", topics=[
            C.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
                C.OffsetCommitRequestPartition(partition_index=i, committed_offset=10 + i, committed_leader_epoch=0,
                                               committed_metadata="m") for i in (0, 1)]),
            C.OffsetCommitRequestTopic(topic_id=unknown, partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=5, committed_metadata="")])]))
        assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics] == [
            (topic_id, [(0, ErrorCode.NONE), (1, ErrorCode.NONE)]), (unknown, [(0, ErrorCode.UNKNOWN_TOPIC_ID)])]

        def fetch(version: int, topics: list | None) -> list:
            (group,) = client.request(offset_fetch.API, version, F.cls(groups=[
                F.OffsetFetchRequestGroup(group_id="g", topics=topics)])).groups
            assert group.error_code == ErrorCode.NONE
            return [(t.topic_id if version >= 10 else t.name,
                     [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                    for t in group.topics]

        by_id = [F.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0, 1]),
                 F.OffsetFetchRequestTopics(topic_id=unknown, partition_indexes=[3])]
        assert fetch(10, by_id) == [(topic_id, [(0, 10, 0), (1, 11, 0)]),
                                    (unknown, [(3, -1, ErrorCode.UNKNOWN_TOPIC_ID)])]
        assert fetch(10, None) == [(topic_id, [(0, 10, 0), (1, 11, 0)])]
        by_name = [F.OffsetFetchRequestTopics(name="orders", partition_indexes=[1])]
        assert fetch(9, by_name) == [("orders", [(1, 11, 0)])]
