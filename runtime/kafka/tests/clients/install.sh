#!/usr/bin/env bash
# Installs the real Kafka clients that the isr-kafka tests drive: kcat (Debian) and the Python
# clients kafka-python and confluent-kafka (PyPI). Idempotent: each is installed only if absent,
# so CI may call it on every run at little cost.
set -euo pipefail

if ! command -v kcat >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y kcat
fi

PY="${PYTHON:-python3}"
if ! "$PY" -c 'import kafka' >/dev/null 2>&1; then
    "$PY" -m pip install --quiet kafka-python
fi
if ! "$PY" -c 'import confluent_kafka' >/dev/null 2>&1; then
    "$PY" -m pip install --quiet confluent-kafka
fi

echo "kafka clients: kcat $(kcat -V 2>&1 | head -n1 | tr -d '\n'); $("$PY" -c 'import kafka, confluent_kafka; print("kafka-python", kafka.__version__, "confluent-kafka", confluent_kafka.version()[0])')"
