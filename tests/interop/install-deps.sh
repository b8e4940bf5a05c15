#!/usr/bin/env bash
# Install what the interop tests need besides Python packages: kcat (Debian, librdkafka 2.0.2),
# node + npm, and kafkajs 2.2.4 with its codecs (npm ci from the committed package-lock.json); and Debian's
# chromium, in which tests/drill render a drill's report; and Docker (docker.io, docker-compose, debootstrap), with
# which tests/shipped/test_docker.py builds the image and runs the compose files: a Docker engine that does not
# answer is started here (as root), and left running (`make test` runs this first).
# Idempotent and quick when everything is present. Debian packages are installed only as root
# (CI and fresh project machines run as root); otherwise it says what is missing and fails.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
# node from Debian ships npm separately; node from other sources bundles it
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "install-deps: missing ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    echo "install-deps: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi

if ! docker info >/dev/null 2>&1; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "install-deps: no Docker engine answers; start one (sudo systemctl start docker) or run as root" >&2
        exit 1
    fi
    echo "install-deps: starting dockerd (log: /tmp/epoch-broker-dockerd.log; it keeps running)"
    nohup dockerd >/tmp/epoch-broker-dockerd.log 2>&1 </dev/null &
    for _ in $(seq 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
    docker info >/dev/null 2>&1 || { echo "install-deps: dockerd did not start:" >&2; tail -5 /tmp/epoch-broker-dockerd.log >&2; exit 1; }
fi

if [[ ! -f js/node_modules/.package-lock.json ]] || ! cmp -s js/package-lock.json js/node_modules/.lock-copy; then
    echo "install-deps: npm ci in tests/interop/js (kafkajs 2.2.4, kafkajs-snappy, lz4js, zstd-codec)"
    (cd js && npm ci --no-audit --no-fund --loglevel=error </dev/null && cp package-lock.json node_modules/.lock-copy)
fi
kcat_version=$(kcat -V 2>/dev/null | grep -o 'Version [0-9.]*, librdkafka [0-9.]*\|librdkafka [0-9.]*' | head -1 || true)
echo "install-deps: kcat ($kcat_version), node $(node --version)," \
     "kafkajs $(node -p "require('./js/node_modules/kafkajs/package.json').version")"
