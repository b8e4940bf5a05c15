"""Kafka's znodes, derived from the metadata log, for the ZooKeeper store (zookeeper.py): a cluster whose
controller keeps its log in ZooKeeper reads there as a Kafka cluster in ZooKeeper mode does, with ZooKeeper's own
CLI (`get /brokers/topics/t/partitions/0/state`).

    /brokers/ids/<id>                              a registered, unfenced broker: {"version":5,"host":...,"port":...,
                                                   "endpoints":[...],"rack":...,"timestamp":"ms","broker_epoch":N}
    /brokers/topics/<topic>                        {"version":3,"topic_id":"...","partitions":{"0":[1,2,3]},
                                                   "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<topic>/partitions/<p>/state   {"controller_epoch":E,"leader":L,"version":1,"leader_epoch":LE,
                                                   "isr":[1,2]}

Rules:
- A view, never read back: the metadata log is the truth. After each append the store writes the view of what
  it changed in one multi-op fenced as the append is (the controller epoch's version), each znode set with the
  version this controller last wrote (compare-and-set, as Kafka's controller updates partition state).
- `/brokers/ids/<id>` is ephemeral, as in Kafka, but of the controller's session (brokers do not talk to
  ZooKeeper here): each newly elected controller writes the whole view again (`sync`), its brokers included; a
  predecessor may also have died between an append and its view.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from epoch_broker.broker.metadata.image import MetadataCache, PartitionState, TopicState
from epoch_broker.broker.metadata.records import (
    BrokerFenceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicConfigRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"


def topic_data(topic: TopicState) -> bytes:
    def assignment(field: str) -> dict[str, list[int]]:
        return {str(p): list(getattr(s, field)) for p, s in sorted(topic.partitions.items()) if getattr(s, field)}

    return json.dumps({"version": 3, "topic_id": base64.urlsafe_b64encode(topic.topic_id).decode().rstrip("="),
                       "partitions": assignment("replicas"), "adding_replicas": assignment("adding_replicas"),
                       "removing_replicas": assignment("removing_replicas")}).encode()


def partition_state_data(state: PartitionState, controller_epoch: int) -> bytes:
    return json.dumps({"controller_epoch": controller_epoch, "leader": state.leader, "version": 1,
                       "leader_epoch": state.leader_epoch, "isr": list(state.isr)}).encode()


def broker_data(record: RegisterBrokerRecord) -> bytes:
    endpoints = [f"{name}://{address}" for name, address in record.endpoints.items()]
    return json.dumps({"version": 5, "host": record.host, "port": record.port, "endpoints": endpoints,
                       "rack": record.rack, "timestamp": str(int(time.time() * 1000)),
                       "broker_epoch": record.broker_epoch}).encode()


class KafkaZnodes:
    """The view's znodes under `root`, with the version this controller last wrote of each."""

    def __init__(self, client: KazooClient, root: str) -> None:
        self.client = client
        self.root = root
        self.versions: dict[str, int] = {}

    def _path(self, *parts: object) -> str:
        return self.root + "/".join(str(part) for part in parts)

    def sync(self, image: MetadataCache, controller_epoch: int) -> None:
        """Write the whole view of `image` (a newly elected controller), removing what the log no longer has."""
        self.versions.clear()
        self.client.ensure_path(self._path(BROKER_IDS))
        self.client.ensure_path(self._path(TOPICS))
        for name in set(self.client.get_children(self._path(TOPICS))) - set(image.topics_by_name):
            self.client.delete(self._path(TOPICS, name), recursive=True)
        for node_id in self.client.get_children(self._path(BROKER_IDS)):
            self.client.delete(self._path(BROKER_IDS, node_id))  # a predecessor's ephemerals, or stale ones
        for topic in image.topics_by_name.values():
            self._put(self._path(TOPICS, topic.name), topic_data(topic))
            for index, state in topic.partitions.items():
                self._put(self._path(TOPICS, topic.name, "partitions", index, "state"),
                          partition_state_data(state, controller_epoch))
        for node_id, record in image.brokers.items():
            if node_id not in image.fenced_brokers:
                path = self._path(BROKER_IDS, node_id)
                self.client.create(path, broker_data(record), ephemeral=True)
                self.versions[path] = 0

    def _put(self, path: str, data: bytes) -> None:
        try:
            self.versions[path] = self.client.set(path, data).version
        except NoNodeError:
            self.client.create(path, data, makepath=True)
            self.versions[path] = 0

    def apply(self, image: MetadataCache, records: list[Any], controller_epoch: int) -> list[Op]:
        """Apply `records` to `image`; returns the view's changes, in order (a parent before its child, a child's
        delete before its parent's)."""
        topics: dict[bytes, None] = {}
        partitions: dict[tuple[bytes, int], None] = {}
        removed: list[str] = []
        brokers: dict[int, None] = {}
        for record in records:
            match record:
                case TopicRecord() | TopicConfigRecord():
                    topics[record.topic_id] = None
                case PartitionRecord() | PartitionChangeRecord():
                    topics[record.topic_id] = None
                    partitions[(record.topic_id, record.partition)] = None
                case RemoveTopicRecord() if record.topic_id in image.topics_by_id:
                    removed.append(image.topics_by_id[record.topic_id].name)
                case RegisterBrokerRecord() | UnregisterBrokerRecord() | BrokerFenceRecord():
                    brokers[record.node_id] = None
            image.apply(record)
        ops: list[Op] = []
        for name in removed:  # children first: ZooKeeper deletes only leaves
            prefix = self._path(TOPICS, name)
            for path in [p for p in self.versions if p == prefix or p.startswith(prefix + "/")]:
                del self.versions[path]
            ops.extend(Op("delete", path) for path in self._tree(prefix))
        for topic_id in topics:
            topic = image.topics_by_id.get(topic_id)
            if topic is not None:
                self._write(ops, self._path(TOPICS, topic.name), topic_data(topic), [])
        for topic_id, index in partitions:
            topic = image.topics_by_id.get(topic_id)
            if topic is not None and index in topic.partitions:
                parents = [self._path(TOPICS, topic.name, "partitions"), self._path(TOPICS, topic.name, "partitions",
                                                                                    index)]
                self._write(ops, self._path(TOPICS, topic.name, "partitions", index, "state"),
                            partition_state_data(topic.partitions[index], controller_epoch), parents)
        for node_id in brokers:
            path = self._path(BROKER_IDS, node_id)
            record = image.brokers.get(node_id)
            if record is not None and node_id not in image.fenced_brokers:
                self._write(ops, path, broker_data(record), [], ephemeral=True)
            elif path in self.versions:
                ops.append(Op("delete", path, version=self.versions.pop(path)))
        return ops

    def _write(self, ops: list[Op], path: str, data: bytes, parents: list[str], ephemeral: bool = False) -> None:
        if path in self.versions:
            ops.append(Op("set", path, data, self.versions[path]))
            return
        for parent in parents:
            if parent not in self.versions and self.client.exists(parent) is None:
                ops.append(Op("create", parent))
                self.versions[parent] = 0
        ops.append(Op("create", path, data, ephemeral=ephemeral))

    def _tree(self, path: str) -> list[str]:
        """`path` and everything under it, leaves first (as it is in ZooKeeper now)."""
        try:
            children = self.client.get_children(path)
        except NoNodeError:
            return []
        return [found for child in children for found in self._tree(f"{path}/{child}")] + [path]

    def committed(self, ops: list[Op], results: list[Any]) -> bool:
        """Record the versions the view's ops produced; False if one failed (the view needs a `sync`)."""
        for op, result in zip(ops, results, strict=True):
            if isinstance(result, KazooException):
                return False
            if op.kind != "delete":
                self.versions[op.path] = getattr(result, "version", 0)  # a set answers its stat, a create its path
        return True


@dataclass(frozen=True, slots=True)
class Op:
    """One write of the view: create, set (at `version`) or delete (at `version`, -1: any)."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False

    @property
    def size(self) -> int:
        return len(self.path) + len(self.data) + 32

    def add_to(self, transaction: Any) -> None:
        if self.kind == "create":
            transaction.create(self.path, self.data, ephemeral=self.ephemeral)
        elif self.kind == "set":
            transaction.set_data(self.path, self.data, self.version)
        else:
            transaction.delete(self.path, self.version)
