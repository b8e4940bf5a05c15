"""docs/releases.md: the Kafka releases a broker can claim (`kafka.version`) and, for each, what of it this broker
does not serve, computed from the release data and the handler registry (`make docs`)."""

from __future__ import annotations

from epoch_broker.broker.network.dispatch import BROKER, load_handlers, served_by
from epoch_broker.broker.reference import table
from epoch_broker.protocol.release_data import API_NAMES
from epoch_broker.protocol.releases import RELEASES, KafkaRelease


def not_served(release: KafkaRelease) -> list[str]:
    """What `release` advertises that a broker claiming it cannot: "Produce v0-2", "DescribeQuorum (all)"."""
    served = served_by(load_handlers(BROKER), release)
    missing = []
    for key, (low, high) in sorted(release.api_versions.items()):
        name = API_NAMES[key]
        if key not in served:
            missing.append(f"{name} (all)")
            continue
        versions = served[key].versions
        gaps = [(low, versions.low - 1), (versions.high + 1, high)]
        missing += [f"{name} v{a}" if a == b else f"{name} v{a}-{b}" for a, b in gaps if a <= b]
    return missing


def render_reference() -> str:
    rows = [(f"`{release.name}`", "ZooKeeper mode" if release.zookeeper_mode else "KRaft",
             str(len(served_by(load_handlers(BROKER), release))), str(len(release.api_versions)), release.source)
            for release in RELEASES.values()]
    feature_rows = [(f"`{release.name}`",
                     ", ".join(f"`{name}` {low}-{high}" for name, (low, high) in release.supported_features.items()),
                     ", ".join(f"`{name}` {level}" for name, level in release.finalized_features.items()))
                    for release in RELEASES.values() if release.supported_features]
    sections = [f"### {release.name}\n\n" + (", ".join(not_served(release)) or "nothing")
                for release in RELEASES.values()]
    return f"""# Kafka releases

A broker started with `kafka.version=<release>` answers as that Apache Kafka release does: ApiVersions lists the
release's APIs at the versions both it and this broker serve, a request for any other API or version is refused as
that release refuses it, and the configs below follow the release. Unset, the broker serves everything it has:
Kafka 4.2's client APIs with the older versions kept (docs/configuration.md, `kafka.version`).

With the pytest plugin, `--kafka-versions 3.7,4.0` (or `all`) runs every test that uses a `kafka_*` fixture once
per release, one broker per release; `--kafka-broker-config kafka.version=3.7` sets one release for all.

## Releases

The version ranges are Kafka's own: read from its message schemas at the release's tag (the APIs of a
ZooKeeper-mode broker, as 2.8 to 3.9 ran by default), and for 4.0 on (KRaft only) from a real broker's ApiVersions
(tools/kafka_releases.py says which, and checks the two sources agree where both exist).

{table(("release", "answers as", "APIs served", "APIs of the release", "version ranges from"), rows)}

## Configs that follow the release

{table(("what", "before 4.0", "4.0 on (and unset)"), [
    ("`message.format.version` (topic), `log.message.format.version`",
     "accepted and ignored (every batch is v2)", "unknown: INVALID_CONFIG, as Kafka 4.0 (KIP-724)"),
    ("DescribeConfigs of `advertised.listeners` on a broker",
     "its own source (DEFAULT_CONFIG when not set), read_only false (a per-broker dynamic config)",
     "STATIC_BROKER_CONFIG with the endpoints advertised, read-only"),
    ("DescribeConfigs of `min.insync.replicas` (topics, brokers)", "the broker's setting or default",
     "4.1 on (and unset): a cluster-level dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), as Kafka's controller "
     "writes it for eligible leader replicas (KIP-966); 4.0: as before"),
    ("KIP-890's check that a transactional write's partition is in its transaction "
     "(`transaction.partition.verification.enable`)", "from 3.6 (before, not checked)", "checked"),
    ("LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown",
     "advertised; answered STALE_CONTROLLER_EPOCH (ControlledShutdown: NOT_CONTROLLER), never acted on",
     "not served (ZooKeeper mode is gone)"),
])}

Brokers talk to each other within the release too (a follower of a broker claiming 2.8 or 3.0 fetches by topic
name with Fetch v12), and to their controller with this broker's own APIs.

## Feature flags (KIP-584)

ApiVersions v3+ lists the release's features as its brokers do: a ZooKeeper-mode broker none (its cluster has
feature versioning enabled with nothing finalized, epoch 0), a KRaft broker the features below, finalized at the
offset of the metadata it has applied (levels 0 are not listed as finalized; to a v3 request, features whose
minimum is 0 are not listed as supported, as Kafka does since KAFKA-17492).

{table(("release", "supported", "finalized"), feature_rows)}

`transaction.version` stays at 0, as on a 4.x cluster formatted with it: transactions v2 (KIP-890 part 2) are
not built, and a client (Kafka's Java producer) uses them only when level 2 is finalized; no client installed here
sends them. `group.version` 1 says KIP-848's consumer groups are served. The other features of these releases
(`eligible.leader.replicas.version`, and the later releases' share and streams groups) are not listed: not served.
Unset, the broker lists no features.

## What each release has that this broker does not serve

{(chr(10) * 2).join(sections)}
"""
