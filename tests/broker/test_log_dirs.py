"""Data is never deleted on a guess (issue 17.6): meta.properties ties a log dir to its node and cluster, a lost
metadata log stops the start, partitions no longer assigned are renamed -stray, and an unusable checkpoint is
reported by name. Each case runs the broker as a user does, as a process."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from epoch_broker.client.aio import KafkaClient
from epoch_broker.storage import meta_properties
from epoch_broker.storage.checkpoint import CheckpointFile
from tests.broker.conftest import batch, create_topic, produce_to
from tests.broker.test_limits import run_serve
from tests.helpers import BrokerProcess, start_broker


def with_a_topic(tmp_path: Path) -> BrokerProcess:
    """A broker that served topic t (two records), stopped cleanly."""
    process = start_broker(tmp_path, {"offsets.topic.num.partitions": "1"})

    async def make() -> None:
        async with await KafkaClient.connect(process.bootstrap) as client:
            await client.negotiate()
            await create_topic(client, "t")
            await produce_to(client, "t", batch(b"a", b"b"))

    try:
        asyncio.run(make())
    finally:
        process.stop()
    return process


def test_meta_properties_is_written_on_first_start_and_names_the_node_and_cluster(tmp_path: Path) -> None:
    process = with_a_topic(tmp_path)
    meta = meta_properties.read(str(process.data_dir))
    assert meta is not None and meta.node_id == 0 and meta.cluster_id and meta.version == 1
    assert len(meta.directory_id) == 22


def test_another_node_id_on_the_same_data_dir_stops_the_start_and_keeps_every_partition(tmp_path: Path) -> None:
    process = with_a_topic(tmp_path)
    result = run_serve(tmp_path, process, **{"node.id": "7"})
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("epoch-broker: ") and "belongs to node 0, not node 7" in last
    assert (process.data_dir / "t-0").is_dir() and list((process.data_dir / "t-0").glob("*.log"))


def test_a_missing_metadata_log_stops_the_start_and_deletes_nothing(tmp_path: Path) -> None:
    process = with_a_topic(tmp_path)
    (process.data_dir / "cluster-metadata.log").unlink()
    result = run_serve(tmp_path, process)
    assert result.returncode == 2
    assert "cluster-metadata.log is missing" in result.stderr.strip().splitlines()[-1]
    assert (process.data_dir / "t-0").is_dir()
    assert not (process.data_dir / "cluster-metadata.log").exists()  # and no empty one was made in its place


def test_a_corrupt_metadata_log_stops_the_start_with_its_path(tmp_path: Path) -> None:
    process = with_a_topic(tmp_path)
    path = process.data_dir / "cluster-metadata.log"
    path.write_bytes(b"{not json}\n" + path.read_bytes())
    result = run_serve(tmp_path, process)
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert "the metadata log cannot be read" in last and str(path) in last


def test_a_log_dir_of_another_cluster_stops_the_start(tmp_path: Path) -> None:
    process = with_a_topic(tmp_path)
    meta_path = process.data_dir / "meta.properties"
    meta_path.write_text(meta_path.read_text().replace("cluster.id=", "cluster.id=other-"))
    result = run_serve(tmp_path, process)
    assert result.returncode == 2
    assert "belongs to cluster other-" in result.stderr.strip().splitlines()[-1]


def test_a_partition_no_longer_assigned_is_renamed_stray_never_deleted(tmp_path: Path) -> None:
    process = with_a_topic(tmp_path)
    # a partition directory the metadata knows nothing of (deleted while this broker was down, say)
    orphan = process.data_dir / "gone-0"
    (process.data_dir / "t-0").rename(orphan)
    restarted = process.start()
    try:
        strays = list(process.data_dir.glob("gone-0.*-stray"))
        assert len(strays) == 1 and list(strays[0].glob("*.log"))
        assert not orphan.exists()
        assert "gone-0 is not assigned to this broker: its log is kept as" in process.log_path.read_text()
    finally:
        restarted.stop()
    assert process.start().stop() == 0  # a -stray dir is left alone by later starts


@pytest.mark.parametrize(("content", "reason"), [
    ("0\n2\n1 5\n", "1 entries where the count line says 2"),
    ("7\n0\n", "format version 7, this broker reads version 0"),
])
def test_an_unusable_checkpoint_is_reported_by_name_with_what_replaces_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str, reason: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        assert CheckpointFile(str(path), fallback="rebuilt from the batches").read((int, int)) is None
    assert f"ignoring checkpoint {path}: {reason}; rebuilt from the batches" in caplog.text
