"""The value parsers of the config catalogue: text as a properties file or a config request holds it, to a value.

Rules:
- A parser takes the text and returns the value, or raises ValueError; its `expected` (set by `expects`) is the
  one phrase an error message and the reference page show for what it takes ("an integer >= 14").
- Parsers check the value alone; a rule between keys (a listener's protocol, the session timeout bounds) is
  checked once the whole config is read (config/__init__.py `build_config`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from epoch_broker.broker.principal import parse_super_users
from epoch_broker.protocol.releases import KafkaRelease, parse_release

Parser = Callable[[str], Any]
_P = TypeVar("_P", bound=Parser)

MIN_SECRET_LENGTH = 16
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")  # Kafka's compression.type
# The standard ACL authorizer under both of Kafka's names (ZooKeeper-era and KRaft): broker/security/acl.py.
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")
# group.consumer.assignors: this broker's assignors, by name or by Kafka's class name
_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


def expects(text: str) -> Callable[[_P], _P]:
    """Name what a parser takes, for error messages and the reference page."""
    def mark(parse: _P) -> _P:
        parse.expected = text  # type: ignore[attr-defined]
        return parse

    return mark


def expected(parse: Parser) -> str:
    return getattr(parse, "expected", "a valid value")


def integer(minimum: int, maximum: int | None = None) -> Parser:
    @expects(f"an integer >= {minimum}" if maximum is None else f"an integer from {minimum} to {maximum}")
    def parse(text: str) -> int:
        # the reasons as Kafka's ConfigDef gives them (a group config's INVALID_CONFIG message quotes them)
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("Not a number of type INT") from None
        if value < minimum:
            raise ValueError(f"Value must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ValueError(f"Value must be no more than {maximum}")
        return value

    return parse


def number(minimum: float, maximum: float = float("inf")) -> Parser:
    @expects(f"a number from {minimum} to {maximum}")
    def parse(text: str) -> float:
        value = float(text.strip())
        if not minimum <= value <= maximum:  # NaN too
            raise ValueError
        return value

    return parse


def scaled(parse: Parser, factor: int) -> Parser:
    """`parse`'s integer times `factor` (log.roll.hours in milliseconds)."""
    @expects(expected(parse))
    def parse_scaled(text: str) -> int:
        return int(parse(text)) * factor

    return parse_scaled


def choice(*allowed: str) -> Parser:
    @expects("one of " + ", ".join(allowed))
    def parse(text: str) -> str:
        if text.strip() not in allowed:
            raise ValueError("String must be one of: " + ", ".join(allowed))  # Kafka's ValidString reason
        return text.strip()

    return parse


# java.time.Duration.parse's ISO-8601 form, PnDTnHnMn.nS: days and the time part, each part signed, case-insensitive
_ISO_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                           r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def iso_duration_ms(text: str) -> int:
    """An ISO-8601 duration (`P1D`, `PT1H30M`, `PT0.5S`) in milliseconds, as java.time.Duration.parse reads it:
    at least one part, none after a `T` missing; ValueError otherwise."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"not an ISO-8601 duration: {text}")
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    whole = int(seconds or 0)
    millis = int((fraction or "").ljust(3, "0")[:3]) * (-1 if whole < 0 or (seconds or "").startswith("-") else 1)
    total = (((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60 + whole) * 1000 + millis
    return -total if sign == "-" else total


SHARE_AUTO_OFFSET_RESET = ("latest", "earliest")
BY_DURATION = "by_duration:"


@expects("latest, earliest or by_duration:<ISO-8601 duration, not negative>")
def share_auto_offset_reset(text: str) -> str:
    """Kafka's ShareGroupAutoOffsetResetStrategy: `latest`, `earliest` or `by_duration:<duration>`, a duration
    not negative (the share-partition starts at the first record that recent)."""
    value = text.strip()
    if value in SHARE_AUTO_OFFSET_RESET:
        return value
    try:
        valid = value.startswith(BY_DURATION) and iso_duration_ms(value[len(BY_DURATION):]) >= 0
    except ValueError:
        valid = False
    if not valid:
        raise ValueError(f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be "
                         "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")  # Kafka's
    return value


@expects("true or false")
def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError
    return lowered == "true"


@expects("a string")
def text(value: str) -> str:
    return value.strip()


@expects("an Apache Kafka release, 2.8 to 4.2 (e.g. 3.7 or 3.7.0)")
def kafka_release(text: str) -> KafkaRelease | None:
    return parse_release(text) if text.strip() else None


@expects("a message format version (e.g. 2.8 or 3.0-IV1)")
def message_format_version(text: str) -> str:
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?(-IV\d+)?", text.strip()):
        raise ValueError(text)
    return text.strip()


@expects("delete, compact, compact,delete or empty")
def cleanup_policy(text: str) -> str:
    """Kafka's cleanup.policy list: delete, compact, both (`compact,delete`), as given; or empty, neither: the
    log is kept whole (Kafka takes the empty list, as an IncrementalAlterConfigs SUBTRACT of the last policy
    leaves it)."""
    policies = [part.strip() for part in text.split(",") if part.strip()]
    if not set(policies) <= {"delete", "compact"}:
        raise ValueError
    return ",".join(policies)


@expects("a list of uniform, range (or Kafka's assignor class names)")
def assignors(text: str) -> tuple[str, ...]:
    names = tuple(_ASSIGNOR_CLASSES.get(n.strip(), n.strip()) for n in text.split(",") if n.strip())
    if not names or any(n not in ("uniform", "range") for n in names) or len(set(names)) != len(names):
        raise ValueError
    return names


@expects("a list like PLAINTEXT://host:port")
def listeners(text: str) -> tuple[Endpoint, ...]:
    endpoints = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError
        endpoints.append(Endpoint(name.upper(), host or "0.0.0.0", int(port)))
    if not endpoints:
        raise ValueError
    return tuple(endpoints)


@expects("a list like INTERNAL:PLAINTEXT,EXTERNAL:SSL")
def protocol_map(text: str) -> tuple[str, ...]:
    """`NAME:PROTOCOL` pairs, upper-cased (kept as text: DescribeConfigs shows them as given)."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, colon, protocol = item.partition(":")
        if not colon or not name.strip() or not protocol.strip():
            raise ValueError
        pairs.append(f"{name.strip().upper()}:{protocol.strip().upper()}")
    return tuple(pairs)


@expects("a listener name")
def name(text: str) -> str:
    if not text.strip():
        raise ValueError
    return text.strip().upper()


@expects("a comma-separated list of names")
def names(text: str) -> tuple[str, ...]:
    return tuple(part.strip().upper() for part in text.split(",") if part.strip())


@expects(f"at least {MIN_SECRET_LENGTH} characters, or empty")
def secret(text: str) -> str:
    if text.strip() and len(text.strip()) < MIN_SECRET_LENGTH:
        raise ValueError
    return text.strip()


@expects("principals like User:admin;User:broker")
def super_users(text: str) -> str:
    parse_super_users(text)  # the one parser of principals
    return text.strip()


@expects("a comma-separated list of directories")
def dirs(text: str) -> tuple[str, ...]:
    found = tuple(os.path.abspath(d.strip()) for d in text.split(",") if d.strip())
    if not found:
        raise ValueError
    return found


@expects("broker, controller or broker,controller")
def roles(text: str) -> frozenset[str]:
    found = frozenset(r.strip() for r in text.split(",") if r.strip())
    if not found or not found <= {"broker", "controller"}:
        raise ValueError
    return found


@expects("id@host:port[,id@host:port...]")
def voters(text: str) -> str:
    """`id@host:port,...` -> `host:port,...` (the ids are not needed: the active controller says who it is)."""
    found = [voter.strip() for voter in text.split(",") if voter.strip()]
    if not all(voter.partition("@")[0].isdigit() and voter.partition("@")[2] for voter in found):
        raise ValueError
    return ",".join(voter.partition("@")[2] for voter in found)


@expects("http://host:port, or empty")
def http_listener(text: str) -> str:
    """`http://host:port` (port 0: a free one), or empty for none."""
    text = text.strip()
    if text:
        scheme, sep, address = text.partition("://")
        host, colon, port = address.rstrip("/").rpartition(":")
        if scheme.lower() != "http" or not sep or not host or not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError
        text = f"http://{host}:{int(port)}"
    return text
