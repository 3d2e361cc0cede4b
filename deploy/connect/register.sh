#!/bin/sh
# One-shot: registers the Debezium connectors of docker-compose.yml's two MariaDB servers
# with Kafka Connect, then exits. PUT /connectors/<name>/config creates or updates, so a
# second `docker compose up` changes nothing. The password comes from the environment
# (MARIADB_ROOT_PASSWORD), never from a file in the repository.
set -eu
connect="${CONNECT_URL:-http://connect:8083}"
echo "register: waiting for Kafka Connect at $connect"
until curl -fsS "$connect/connector-plugins" >/dev/null 2>&1; do sleep 2; done
for source in src1 src2; do
  case "$source" in src1) host=mariadb-1; id=101 ;; src2) host=mariadb-2; id=102 ;; esac
  body=$(cat <<JSON
{
  "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
  "tasks.max": "1",
  "database.hostname": "$host",
  "database.port": "3306",
  "database.user": "root",
  "database.password": "$MARIADB_ROOT_PASSWORD",
  "database.server.id": "$id",
  "database.ssl.mode": "disable",
  "database.exclude.list": "mysql,sys,information_schema,performance_schema",
  "topic.prefix": "$source",
  "include.schema.changes": "true",
  "schema.history.internal.kafka.bootstrap.servers": "kafka:9092",
  "schema.history.internal.kafka.topic": "$source-schemahistory",
  "tombstones.on.delete": "true",
  "decimal.handling.mode": "precise"
}
JSON
)
  echo "register: connector $source ($host)"
  printf '%s' "$body" | curl -fsS -X PUT -H "Content-Type: application/json" \
    --data-binary @- "$connect/connectors/$source/config" >/dev/null
done
echo "register: done"
