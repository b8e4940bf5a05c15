#!/bin/bash
# Run confluent-kafka-python's own integration suite against an epoch-broker claiming a Kafka release (issue 33),
# as that project's CI runs it against a cluster (its fixtures take an external one from BROKERS; the KIP-848
# variant of its CI sets TEST_CONSUMER_GROUP_PROTOCOL=consumer, which this script passes through).
#
#   tools/confluent_kafka_suite.sh RELEASE [pytest args...]
#   tools/confluent_kafka_suite.sh 3.7                   # a broker claiming 3.7
#   tools/confluent_kafka_suite.sh native                # a broker without kafka.version
#   TEST_CONSUMER_GROUP_PROTOCOL=consumer tools/confluent_kafka_suite.sh 4.0
#
# CONFLUENT_KAFKA_SRC: a checkout of confluent-kafka-python (its tests; default: tag v2.15.0 of the mirror under
# /work/.mirror, the newest tag there: the installed 2.16.1 has no tag in it and its sdist carries no tests). Its
# venv at $CONFLUENT_KAFKA_VENV (made on first use) gets the wheel of the confluent-kafka installed in this repo's
# venv, not a build of the source. Left out: Schema Registry tests (tests/integration/schema_registry and the
# share consumer's schema_registry cases), tests on trivup SASL or OAuth clusters (share_consumer_sasl,
# share_consumer_oauth, admin/test_describe_operations.py) and integration_test.py (a standalone script needing
# testconf.json; its one pytest test is marked skip). Exits with pytest's status.
set -euo pipefail
release=$1; shift
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
src=${CONFLUENT_KAFKA_SRC:-/tmp/confluent-kafka-suite/src}
venv=${CONFLUENT_KAFKA_VENV:-/tmp/confluent-kafka-suite/venv}
if [ ! -d "$src/tests/integration" ]; then
    echo "confluent_kafka_suite: checking out confluent-kafka-python v2.15.0 into $src" >&2
    mkdir -p "$src"
    git -C /work/.mirror/confluentinc+confluent-kafka-python/repo archive v2.15.0 | tar -x -C "$src"
fi
if [ ! -x "$venv/bin/python" ]; then
    version=$("$python" -c "import confluent_kafka; print(confluent_kafka.version()[0])")
    echo "confluent_kafka_suite: making its venv at $venv (confluent-kafka $version)" >&2
    "$python" -m venv "$venv"
    # the fixtures import the Schema Registry and Avro modules and trivup even for an external cluster
    "$venv/bin/pip" install -q "confluent-kafka[schemaregistry,avro,json,protobuf]==$version" pytest pytest-timeout \
        pytest-asyncio async-timeout "$src/tests/trivup/trivup-0.14.0.tar.gz"
fi
data=$(mktemp -d)
port=$("$python" -c "from epoch_broker.testing import free_port; print(free_port())")
claim=()
[ "$release" != native ] && claim=(--override "kafka.version=$release")
echo "confluent_kafka_suite: broker on 127.0.0.1:$port (${claim[*]:-no kafka.version}), log in $data/broker.log" >&2
# the settings of the suite's trivup broker (trivup's server.properties template and KafkaCluster, plus
# tests/common TestUtils.broker_conf): 4 partitions, auto-create, replication 1, the StandardAuthorizer with
# allow.everyone.if.no.acl.found (the suite's client is anonymous), share locks of 1 s
"$python" -m epoch_broker serve --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$data" \
    --override num.partitions=4 --override auto.create.topics.enable=true --override default.replication.factor=1 \
    --override offsets.topic.replication.factor=1 --override transaction.state.log.replication.factor=1 \
    --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
    --override super.users=User:admin --override allow.everyone.if.no.acl.found=true \
    --override group.share.record.lock.duration.ms=1000 "${claim[@]}" \
    > "$data/broker.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null || true' EXIT
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
cd "$src"
BROKERS="127.0.0.1:$port" "$venv/bin/python" -m pytest tests/integration -q -p no:cacheprovider --timeout=300 -rfEs \
    --ignore=tests/integration/schema_registry --ignore=tests/integration/share_consumer_sasl \
    --ignore=tests/integration/share_consumer_oauth --ignore=tests/integration/admin/test_describe_operations.py \
    --ignore=tests/integration/integration_test.py -k "not schema_registry" "$@"
