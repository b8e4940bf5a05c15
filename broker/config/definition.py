"""One config key's declaration, as Kafka's `ConfigDef.define(name, type, default, validator, importance, doc)`.

Rules:
- A key is declared once, as the field of a group of config/catalogue.py that holds its value:
  `segment_bytes: int = define(...)` makes the field and carries its `ConfigKey` in the field's metadata.
- A key's synonyms are other broker names for the same setting, each with its own parser (`log.roll.hours` is
  `log.roll.ms` in hours); of several given, the last one read wins.
- `topic` names the topic-level key whose default this broker key is (`segment.bytes` for `log.segment.bytes`,
  Kafka's ServerTopicConfigSynonyms): same type, parser and doc. Broker keys are read at start (DescribeConfigs
  answers them read-only); topic keys are dynamic (CreateTopics, AlterConfigs, IncrementalAlterConfigs).
- A key whose value a partition's log uses (`log_field`) takes its default from storage's `LogConfig`, where it
  is declared (storage/ cannot import broker/); `log_config_for` copies it back there, one to one.
- Sensitive is Kafka's rule: a PASSWORD key's value is never shown (DescribeConfigs answers null).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

from epoch_broker.broker.config.parsers import Parser
from epoch_broker.storage.log import LogConfig

KEY = "config.key"  # the field metadata entry holding its ConfigKey
LOG_DEFAULTS = LogConfig()


class ConfigType(IntEnum):
    """Kafka's ConfigDef.Type, numbered as DescribeConfigs v3+ answers config_type."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any  # the value when no source sets it; see `parse_default`
    parse: Parser
    importance: Importance
    doc: str
    synonyms: tuple[tuple[str, Parser], ...] = ()  # (name, parser): other broker names of the setting
    topic: str = ""  # the topic-level key this one is the broker default of
    log_field: str = ""  # the storage LogConfig field the topic key sets, one to one
    per_listener: bool = False  # may be set per listener: `listener.name.<listener>.<name>`
    parse_default: bool = False  # the default is text, parsed each time a config is made (a relative dir)
    attr: str = ""  # the BrokerConfig field (filled in by config/catalogue.py from where the key is declared)
    group: str = ""  # the title of its group, likewise

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def names(self) -> tuple[str, ...]:
        """Every broker name of the setting, its own first."""
        return (self.name, *(synonym for synonym, _ in self.synonyms))


@dataclass(frozen=True, slots=True)
class FromLog:
    """A default declared by storage's LogConfig: the field's name there."""

    field: str


def from_log(field: str) -> FromLog:
    return FromLog(field)


def define(name: str, type: ConfigType, default: Any, parse: Parser, importance: Importance, doc: str, *,
           synonyms: tuple[tuple[str, Parser] | str, ...] = (), topic: str = "", per_listener: bool = False,
           parse_default: bool = False) -> Any:
    """The dataclass field of a config group holding this key's value (typed Any so that it fits any field's
    annotation, as `dataclasses.field` is). A synonym given by name alone takes the key's parser; a `from_log`
    default is LogConfig's, and makes the topic key set that LogConfig field."""
    log_field = default.field if isinstance(default, FromLog) else ""
    if log_field:
        default = getattr(LOG_DEFAULTS, log_field)
    key = ConfigKey(name, type, default, parse, importance, " ".join(doc.split()),
                    tuple((s, parse) if isinstance(s, str) else s for s in synonyms), topic, log_field, per_listener,
                    parse_default)
    if parse_default:
        return dataclasses.field(default_factory=lambda: parse(default), metadata={KEY: key})
    return dataclasses.field(default=default, metadata={KEY: key})


def render_value(value: Any) -> str:
    """A setting as Kafka writes it in properties and DescribeConfigs."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    return "" if value is None else str(value)
