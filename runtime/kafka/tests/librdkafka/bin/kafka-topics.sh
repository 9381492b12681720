#!/usr/bin/env bash
# A stand-in for Kafka's bin/kafka-topics.sh, as librdkafka's tests call it (test.c's
# test_kafka_topics): `--bootstrap-server B --create --topic T [--partitions N]
# [--replication-factor R] [--config K=V]...`, done with `isr topic create`. run.sh puts it on
# KAFKA_PATH (this directory's parent) with ISR naming the isr binary. Anything else is refused.
set -euo pipefail
isr=${ISR:?ISR must name the isr binary}
bootstrap= topic= create=0 args=()
while (($#)); do
    case $1 in
        --bootstrap-server) bootstrap=$2; shift 2 ;;
        --create) create=1; shift ;;
        --topic) topic=${2//\"/}; shift 2 ;;
        --partitions) args+=(--partitions "$2"); shift 2 ;;
        --replication-factor) args+=(--replication-factor "$2"); shift 2 ;;
        --config) args+=(--config "$2"); shift 2 ;;
        *) echo "kafka-topics.sh stand-in: $1 is not supported" >&2; exit 2 ;;
    esac
done
[[ $create == 1 && -n $topic && -n $bootstrap ]] ||
    { echo "kafka-topics.sh stand-in: only --create --topic T with --bootstrap-server" >&2; exit 2; }
exec "$isr" topic create "$topic" --bootstrap "$bootstrap" "${args[@]}"
