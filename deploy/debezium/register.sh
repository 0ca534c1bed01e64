#!/bin/sh
# Registers deploy/debezium/connector.json with Kafka Connect (docker-compose's one-shot job).
# Idempotent: a connector that already exists (409) is left as it is.
set -eu
url="${CONNECT_URL:-http://connect:8083}"
file="${CONNECTOR_FILE:-/deploy/debezium/connector.json}"

echo "waiting for Kafka Connect at $url"
i=0
until curl -fsS "$url/connectors" >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -ge 90 ]; then
    echo "Kafka Connect did not answer at $url" >&2
    exit 1
  fi
  sleep 2
done

code=$(curl -sS -o /tmp/response -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data @"$file" "$url/connectors")
case "$code" in
  201) echo "connector registered" ;;
  409) echo "connector already registered" ;;
  *)
    echo "registering the connector failed ($code):" >&2
    cat /tmp/response >&2
    exit 1
    ;;
esac
