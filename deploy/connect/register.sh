#!/bin/sh
# One-shot: registers the Debezium connectors of docker-compose.yml's two MariaDB servers
# with Kafka Connect, then exits. Each connector's config is a JSON file of its own
# (/connectors/<name>.json, mounted from deploy/connect/), sent as it is: no JSON is built
# here and no secret passes through this script (the configs name the password as
# ${env:DEBEZIUM_PASSWORD}, which Connect reads from its own environment).
# PUT /connectors/<name>/config creates or updates, so a second `docker compose up`
# changes nothing. TOPICS=per-table registers /connectors/per-table/ instead: one topic per
# logical table (src1.orders, src2.orders), a shard's rows in one of its 16 partitions
# (docs/cluster.md, "Thousands of shards"; it needs Debezium 3.6 or later).
set -eu
connect="${CONNECT_URL:-http://connect:8083}"
echo "register: waiting for Kafka Connect at $connect"
until curl -fsS "$connect/connector-plugins" >/dev/null 2>&1; do sleep 2; done
case "${TOPICS:-per-shard}" in
  per-shard) dir=/connectors ;;
  per-table) dir=/connectors/per-table ;;
  *) echo "register: TOPICS is per-shard or per-table, not ${TOPICS}" >&2; exit 2 ;;
esac
for file in "$dir"/*.json; do
  name=$(basename "$file" .json)
  echo "register: connector $name ($file)"
  curl -fsS -X PUT -H "Content-Type: application/json" \
    --data-binary "@$file" "$connect/connectors/$name/config" >/dev/null
done
echo "register: done"
