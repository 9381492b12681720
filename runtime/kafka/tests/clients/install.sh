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
# A Debian-managed Python refuses plain pip installs (PEP 668); fall back to overriding that,
# since these are test-only tools on a throwaway machine.
pip_install() {
    "$PY" -m pip install --quiet "$1" || "$PY" -m pip install --quiet --break-system-packages "$1"
}
if ! "$PY" -c 'import kafka' >/dev/null 2>&1; then
    pip_install kafka-python
fi
if ! "$PY" -c 'import confluent_kafka' >/dev/null 2>&1; then
    pip_install confluent-kafka
fi

echo "kcat: $(kcat -V 2>&1 | grep -m1 Version)"
"$PY" -c 'import kafka, confluent_kafka; print("kafka-python", kafka.__version__, "| confluent-kafka", confluent_kafka.version(), "librdkafka", confluent_kafka.libversion()[0])'
