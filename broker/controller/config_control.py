"""Topic configs (Kafka's ConfigurationControlManager): the overrides a topic's TopicConfigRecord holds, and the
effective values the controller's decisions read.

Rules:
- Only keys of the topic catalogue (broker/config) are accepted, each value parsed by its key; a change with any
  unknown or invalid key changes nothing.
- A change sets a value, or deletes it (None: back to the broker default); the record holds the topic's whole
  override set, and a change that leaves it as it was writes nothing.
- A broker's own configs (its properties, the fault hooks) are its process's, not metadata.
"""

from __future__ import annotations

from epoch_broker.broker.config import TOPIC_CONFIGS, BrokerConfig, topic_config, validate_topic_configs
from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.image import MetadataCache, TopicState
from epoch_broker.broker.metadata.records import TopicConfigRecord
from epoch_broker.protocol.errors import ErrorCode


class ConfigurationControlManager:
    def __init__(self, config: BrokerConfig, image: MetadataCache) -> None:
        self.config = config
        self.image = image

    def unclean_leader_election_enabled(self, topic: TopicState) -> bool:
        return bool(topic_config(self.config, topic.configs)["unclean.leader.election.enable"])

    def alter_topic_configs(self, name: str, changes: dict[str, str | None],
                            validate_only: bool) -> ControllerResult[tuple[ErrorCode, str | None]]:
        """Set or delete topic configs, as one TopicConfigRecord."""
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return ControllerResult([], (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"))
        if unknown := [key for key in changes if key not in TOPIC_CONFIGS]:
            return ControllerResult([], (ErrorCode.INVALID_CONFIG, f"unknown or unsupported topic config {unknown[0]}"))
        if (problem := validate_topic_configs({k: v for k, v in changes.items() if v is not None})) is not None:
            return ControllerResult([], (ErrorCode.INVALID_CONFIG, problem))
        configs = {k: v for k, v in {**topic.configs, **changes}.items() if v is not None}
        if validate_only or configs == topic.configs:
            return ControllerResult([], (ErrorCode.NONE, None))
        return ControllerResult([TopicConfigRecord(topic.topic_id, configs)], (ErrorCode.NONE, None),
                                (f"topic {name} configs now {configs}",))
