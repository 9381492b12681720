#!/usr/bin/env bash
# Installs the real Kafka clients that the isr-kafka and isr-runtime tests drive: kcat (Debian)
# and the Python clients kafka-python and confluent-kafka (PyPI). Idempotent: each is installed
# only if absent (or too old), so CI may call it on every run at little cost.
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
    "$PY" -m pip install --quiet "$@" || "$PY" -m pip install --quiet --break-system-packages "$@"
}
# Each client is installed if absent, and upgraded if it is too old to have the admin API for
# SCRAM users (Describe/AlterUserScramCredentials) that the security tests drive.
if ! "$PY" -c 'from kafka import KafkaAdminClient as A; assert hasattr(A, "alter_user_scram_credentials")' >/dev/null 2>&1; then
    pip_install --upgrade kafka-python
fi
if ! "$PY" -c 'from confluent_kafka.admin import AdminClient as A; assert hasattr(A, "alter_user_scram_credentials")' >/dev/null 2>&1; then
    pip_install --upgrade confluent-kafka
fi

echo "kcat: $(kcat -V 2>&1 | grep -m1 Version)"
"$PY" -c 'import kafka, confluent_kafka; print("kafka-python", kafka.__version__, "| confluent-kafka", confluent_kafka.version(), "librdkafka", confluent_kafka.libversion()[0])'
