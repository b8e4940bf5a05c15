# epoch-broker image: `docker build -t epoch-broker .`; docker-compose.yml runs a controller and three brokers.
#
# BASE_IMAGE: any image with python3 >= 3.11 and its venv module, e.g. Debian bookworm's python3 + python3-venv
# (`--build-arg BASE_IMAGE=...`). The package goes into a venv, so an externally managed Python (PEP 668) works too,
# and no C compiler is needed: where none is, Produce's record scanner runs as Python.
# Offline, or to ship a wheel built elsewhere: put it and its dependencies in ./wheelhouse
# (`pip wheel -w wheelhouse .`); the build then installs from there alone, with no network.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
# names the stage's images, which the legacy builder keeps untagged: `docker image prune --filter label=...`
LABEL org.epoch-broker.stage=build
# .dockerignore lets in only what the package needs (and ./wheelhouse)
COPY . /src
RUN python3 -m venv /opt/epoch-broker \
 && if ls /src/wheelhouse/epoch_broker-*.whl >/dev/null 2>&1; then \
        /opt/epoch-broker/bin/pip install --no-cache-dir --no-index --find-links /src/wheelhouse epoch-broker; \
    else \
        /opt/epoch-broker/bin/pip install --no-cache-dir /src; \
    fi

# The venv alone: the sources, the wheelhouse and pip's build files stay in the build stage.
FROM ${BASE_IMAGE}
COPY --from=build /opt/epoch-broker /opt/epoch-broker
ENV PATH=/opt/epoch-broker/bin:$PATH
# Data lives in /data (a volume in docker-compose.yml); 9092 is the default listener.
VOLUME /data
EXPOSE 9092
ENTRYPOINT ["epoch-broker"]
CMD ["serve", "--override", "listeners=PLAINTEXT://0.0.0.0:9092", "--override", "log.dirs=/data"]
