# epoch-broker image: `docker build -t epoch-broker .`; docker-compose.yml runs a controller and three brokers.
FROM python:3.11-slim

WORKDIR /app
# Only what the package needs: a change to tests or docs does not rebuild the install layer.
COPY pyproject.toml setup.py README.md LICENSE ./
COPY epoch_broker ./epoch_broker
COPY protocol ./protocol
COPY storage ./storage
COPY client ./client
COPY broker ./broker
COPY drill ./drill
COPY spark ./spark
RUN pip install --no-cache-dir . && rm -rf /app/epoch_broker /app/protocol /app/storage /app/client /app/broker /app/drill /app/spark

# Data lives in /data (a volume in docker-compose.yml); 9092 is the default listener.
VOLUME /data
EXPOSE 9092
ENTRYPOINT ["epoch-broker"]
CMD ["serve", "--override", "listeners=PLAINTEXT://0.0.0.0:9092", "--override", "log.dirs=/data"]
