"""Topic configs (Kafka's ConfigurationControlManager): the overrides a topic's TopicConfigRecord holds, and the
effective values the controller's decisions read.

Rules:
- Only keys of the topic catalogue (broker/config) are accepted, each value parsed by its key; a change with any
  unknown or invalid key changes nothing.
- A change sets a value, deletes it (None: back to the broker default), or appends to or subtracts from a
  list-typed one (`ListChange`, IncrementalAlterConfigs' APPEND and SUBTRACT, as Kafka's: the current value is
  the topic's override, else the broker default; APPEND adds the items not there yet, in order; SUBTRACT removes
  every one given; on a key of another type, INVALID_CONFIG). The record holds the topic's whole override set,
  and a change that leaves it as it was writes nothing.
- A client-metrics resource (KIP-714 subscription, broker/client_metrics.py) is changed the same way, its keys and
  values checked as Kafka's ClientMetricsConfigs does (a list change starts from its value, else empty; only
  `metrics` and `match` are lists); its ClientMetricsConfigRecord holds its whole config set, empty when the
  last key is deleted (the subscription is gone).
- A group config resource (ConfigResource type 32, a group id) is changed the same way, its whole resulting set
  checked as Kafka's GroupConfig.validate does (config/`validate_group_configs`; no key is a list, so APPEND and
  SUBTRACT are INVALID_CONFIG, and an empty group id INVALID_REQUEST, as Kafka's controller answers); its
  GroupConfigRecord holds its whole set, empty when the last key is deleted. The group need not exist.
- A broker's own configs (its properties, the fault hooks) are its process's, not metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epoch_broker.broker.client_metrics import MATCH, METRICS, validate_client_metrics_configs
from epoch_broker.broker.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigType,
    render_value,
    topic_config,
    validate_group_configs,
    validate_topic_configs,
)
from epoch_broker.broker.controller.controller_result import ControllerResult
from epoch_broker.broker.metadata.image import MetadataCache, TopicState
from epoch_broker.broker.metadata.records import ClientMetricsConfigRecord, GroupConfigRecord, TopicConfigRecord
from epoch_broker.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ListChange:
    """APPEND (`append`) or SUBTRACT the `items` on a list-typed topic config."""

    append: bool
    items: tuple[str, ...]

    @property
    def operation(self) -> str:
        return "APPEND" if self.append else "SUBTRACT"

    def applied_to(self, current: str) -> str:
        """The list `current` (comma-separated) after this change."""
        parts = [part.strip() for part in current.split(",") if part.strip()]
        if self.append:
            return ",".join(parts + [item for item in dict.fromkeys(self.items) if item not in parts])
        return ",".join(part for part in parts if part not in self.items)

    @classmethod
    def parse(cls, append: bool, value: str | None) -> ListChange:
        return cls(append, tuple(item.strip() for item in (value or "").split(",") if item.strip()))


TopicConfigChange = str | None | ListChange  # SET a value, DELETE (None), APPEND or SUBTRACT


def current_text(config: BrokerConfig, overrides: Mapping[str, str], name: str) -> str:
    """A topic config's value as text: its override, else the broker default, rendered as Kafka writes it."""
    return overrides[name] if name in overrides else render_value(getattr(config, TOPIC_CONFIGS[name].attr))


class ConfigurationControlManager:
    def __init__(self, config: BrokerConfig, image: MetadataCache) -> None:
        self.config = config
        self.image = image

    def unclean_leader_election_enabled(self, topic: TopicState) -> bool:
        return bool(topic_config(self.config, topic.configs)["unclean.leader.election.enable"])

    def alter_topic_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                            validate_only: bool) -> ControllerResult[tuple[ErrorCode, str | None]]:
        """Set, delete, append to or subtract from topic configs, as one TopicConfigRecord."""
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            return ControllerResult([], (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"))
        if unknown := [key for key in changes if key not in self.config.topic_configs]:
            return ControllerResult([], (ErrorCode.INVALID_CONFIG, f"unknown or unsupported topic config {unknown[0]}"))
        not_lists = [(key, change) for key, change in changes.items()
                     if isinstance(change, ListChange) and TOPIC_CONFIGS[key].type != ConfigType.LIST]
        if not_lists:
            key, change = not_lists[0]
            return ControllerResult([], (ErrorCode.INVALID_CONFIG,
                                         f"can't {change.operation} to key {key} because its type is not LIST"))
        values = {key: change.applied_to(current_text(self.config, topic.configs, key))
                  if isinstance(change, ListChange) else change for key, change in changes.items()}
        problem = validate_topic_configs(self.config, {k: v for k, v in values.items() if v is not None})
        if problem is not None:
            return ControllerResult([], (ErrorCode.INVALID_CONFIG, problem))
        configs = {k: v for k, v in {**topic.configs, **values}.items() if v is not None}
        if validate_only or configs == topic.configs:
            return ControllerResult([], (ErrorCode.NONE, None))
        return ControllerResult([TopicConfigRecord(topic.topic_id, configs)], (ErrorCode.NONE, None),
                                (f"topic {name} configs now {configs}",))

    def alter_client_metrics_configs(self, name: str, changes: Mapping[str, TopicConfigChange],
                                     validate_only: bool) -> ControllerResult[tuple[ErrorCode, str | None]]:
        """Set, delete, append to or subtract from a client-metrics resource's configs, as one
        ClientMetricsConfigRecord."""
        current = self.image.client_metrics.get(name, {})
        for key, change in changes.items():
            if isinstance(change, ListChange) and key not in (METRICS, MATCH):
                return ControllerResult([], (ErrorCode.INVALID_CONFIG,
                                             f"can't {change.operation} to key {key} because its type is not LIST"))
        values = {key: change.applied_to(current.get(key, "")) if isinstance(change, ListChange) else change
                  for key, change in changes.items()}
        configs = {k: v for k, v in {**current, **values}.items() if v is not None}
        problem = validate_client_metrics_configs(name, configs)
        if problem is not None:
            return ControllerResult([], problem)
        if validate_only or configs == current:
            return ControllerResult([], (ErrorCode.NONE, None))
        return ControllerResult([ClientMetricsConfigRecord(name, configs)], (ErrorCode.NONE, None),
                                (f"client metrics {name} configs now {configs}",))

    def alter_group_configs(self, group_id: str, changes: Mapping[str, TopicConfigChange],
                            validate_only: bool) -> ControllerResult[tuple[ErrorCode, str | None]]:
        """Set or delete a group's configs, as one GroupConfigRecord."""
        if not group_id:
            return ControllerResult([], (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."))
        values: dict[str, str | None] = {}
        for key, change in changes.items():
            if isinstance(change, ListChange):
                return ControllerResult([], (ErrorCode.INVALID_CONFIG,
                                             f"can't {change.operation} to key {key} because its type is not LIST"))
            values[key] = change
        current = self.image.group_configs.get(group_id, {})
        configs = {k: v for k, v in {**current, **values}.items() if v is not None}
        problem = validate_group_configs(self.config, configs)
        if problem is not None:
            return ControllerResult([], (ErrorCode.INVALID_CONFIG, problem))
        if validate_only or configs == current:
            return ControllerResult([], (ErrorCode.NONE, None))
        return ControllerResult([GroupConfigRecord(group_id, configs)], (ErrorCode.NONE, None),
                                (f"group {group_id} configs now {configs}",))
