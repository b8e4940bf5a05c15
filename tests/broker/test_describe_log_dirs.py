"""DescribeLogDirs with kafka-python's admin client: each log dir with the partitions it holds and their sizes on
disk, the file system's total and usable bytes, and a topic filter."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient

from epoch_broker import testing


def test_log_dirs_list_each_partition_with_its_size_on_disk(tmp_path: Path) -> None:
    with testing.broker(data_dir=tmp_path) as broker:
        broker.create_topic("sized", partitions=2)
        broker.create_topic("other")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for _ in range(10):
            producer.produce("sized", value=b"x" * 1000, partition=1)
        assert producer.flush(10) == 0
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            ((answer,),) = [a["log_dirs"] for a in admin.describe_log_dirs()]
            filtered = admin.describe_log_dirs(topic_partitions={"sized": [1]})
        finally:
            admin.close()
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in answer["topics"] for p in t["partitions"]}
    on_disk = sum(f.stat().st_size for f in Path(answer["log_dir"], "sized-1").glob("*.log"))
    assert sizes[("sized", 0)] == 0 and sizes[("sized", 1)] == on_disk > 10_000
    assert ("other", 0) in sizes
    assert answer["error_code"] == 0 and 0 < answer["usable_bytes"] <= answer["total_bytes"]
    ((only,),) = [a["log_dirs"] for a in filtered]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only["topics"]] == [("sized", [1])]
