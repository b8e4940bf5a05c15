#!/bin/bash
# Run kafka-python's own integration suite against an epoch-broker claiming a Kafka release (issue 33), as that
# project's CI runs it against a real broker (its fixtures take an external broker from KAFKA_URI).
#
#   tools/kafka_python_suite.sh RELEASE KAFKA_VERSION [pytest args...]
#   tools/kafka_python_suite.sh 3.7 3.7.0        # a broker claiming 3.7, the suite told it is 3.7.0
#   tools/kafka_python_suite.sh native 4.2.0     # a broker without kafka.version
#
# KAFKA_PYTHON_SRC: a checkout of kafka-python (its tests; default: tag 3.0.11 of the mirror under /work/.mirror),
# installed into its own venv at $KAFKA_PYTHON_VENV (made on first use). The SSL and SASL tests start brokers of
# their own from a Kafka distribution, so they are left out. Exits with pytest's status.
set -euo pipefail
release=$1; kafka_version=$2; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
src=${KAFKA_PYTHON_SRC:-/tmp/kafka-python-suite/src}
venv=${KAFKA_PYTHON_VENV:-/tmp/kafka-python-suite/venv}
if [ ! -d "$src/test/integration" ]; then
    echo "kafka_python_suite: checking out kafka-python 3.0.11 into $src" >&2
    mkdir -p "$src"
    git -C /work/.mirror/dpkp+kafka-python/repo archive 3.0.11 | tar -x -C "$src"
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "kafka_python_suite: making its venv at $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q -e "$src" pytest pytest-mock pytest-timeout lz4 python-snappy zstandard crc32c xxhash
fi
data=$(mktemp -d)
port=$("$python" -c "from epoch_broker.testing import free_port; print(free_port())")
claim=()
[ "$release" != native ] && claim=(--override "kafka.version=$release")
echo "kafka_python_suite: broker on 127.0.0.1:$port (${claim[*]:-no kafka.version}), log in $data/broker.log" >&2
# the settings of kafka-python's own broker template (servers/resources/default/kafka.properties), with its ACL
# tests' authorizer (the suite's client is anonymous: a super user, as its template's broker user is)
"$python" -m epoch_broker serve --override "listeners=PLAINTEXT://127.0.0.1:$port" --override "log.dirs=$data" \
    --override num.partitions=4 --override offsets.topic.num.partitions=2 \
    --override group.min.session.timeout.ms=1000 --override auto.create.topics.enable=true \
    --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
    --override super.users=User:ANONYMOUS "${claim[@]}" \
    > "$data/broker.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null || true' EXIT
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
mkdir -p "$data/kafka-bin"  # the fixture wants a distribution's folder even for an external broker
cd "$src"
KAFKA_ROOT="$data/kafka-bin" KAFKA_VERSION=$kafka_version KAFKA_URI="PLAINTEXT://127.0.0.1:$port" \
    "$venv/bin/python" -m pytest test/integration -q -p no:cacheprovider -o log_level=WARNING --timeout=120 -rfEs \
    --ignore=test/integration/test_ssl_integration.py --ignore=test/integration/test_sasl_integration.py "$@"
