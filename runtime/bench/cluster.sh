#!/usr/bin/env bash
# Benchmarks a local isr cluster and prints the figures in the README's performance section.
#
#   runtime/bench/cluster.sh [throughput|failover|large|all]
#
# throughput: for each flush policy, three brokers and a controller on 127.0.0.1, topics with
#   3 partitions at replication factor 1 and 3 (min ISR 2), acks=all, 100-byte records in
#   batches of 100, `isr perf produce` with PRODUCERS concurrent producers (default "3 12");
#   then `isr perf consume`, and each broker's peak resident memory (VmHWM).
# failover: acks=all load on an RF 3 topic, SIGKILL of the leader of partition 0 after 2 s;
#   prints when status first shows a new leader, and the slowest produce request (the
#   acknowledged write that waited out the election).
# large: large records on one partition at RF 3 (page cache): LARGE_RECORDS records of each of
#   LARGE_SIZES bytes (default 100 of 28000, 200000 and 500000), written one per request, then
#   read back with `isr perf consume` (1 MiB fetches): records/s, MB/s and fetch latency.
# Environment: RECORDS (default 2000000), PRODUCERS, PORT (default 39090), ISR (the binary;
#   default target/release/isr, built if missing). Run on a quiet machine: the brokers, the
#   controller and the load generator share its cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
ISR=${ISR:-target/release/isr}
[ -x "$ISR" ] || cargo build --release -p isr-runtime
RECORDS=${RECORDS:-2000000}
PRODUCERS=${PRODUCERS:-"3 12"}
PORT=${PORT:-39090}
BOOT=127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2)),127.0.0.1:$((PORT + 3))
WORK=$(mktemp -d)
CLUSTER=
stop() {
  if [ -n "$CLUSTER" ]; then kill -TERM "$CLUSTER" 2>/dev/null || true; wait "$CLUSTER" 2>/dev/null || true; fi
  CLUSTER=
}
trap 'stop; rm -rf "$WORK"' EXIT

start() { # start FLUSH
  rm -rf "$WORK/data"
  "$ISR" cluster --brokers 3 --dir "$WORK/data" --port "$PORT" --flush "$1" >"$WORK/cluster.out" 2>&1 &
  CLUSTER=$!
  for _ in $(seq 100); do grep -q bootstrap "$WORK/cluster.out" 2>/dev/null && return; sleep 0.1; done
  echo "the cluster did not start: $(cat "$WORK/cluster.out")" >&2
  exit 1
}

leader_of() { # leader_of TOPIC PARTITION
  "$ISR" status "$1" --bootstrap "$BOOT" --json 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin); print([p for p in r if p['partition']==$2][0]['leader'])" 2>/dev/null || true
}

throughput() {
  for flush in page-cache always; do
    start "$flush"
    "$ISR" topic create rf1 --bootstrap "$BOOT" --partitions 3 --replication-factor 1 >/dev/null
    "$ISR" topic create rf3 --bootstrap "$BOOT" --partitions 3 --replication-factor 3 --min-insync-replicas 2 >/dev/null
    sleep 1
    for k in $PRODUCERS; do
      for topic in rf1 rf3; do
        printf 'flush=%-10s producers=%-3s %s: ' "$flush" "$k" "$topic"
        "$ISR" perf produce --bootstrap "$BOOT" --topic "$topic" --records "$RECORDS" \
          --record-size 100 --batch 100 --producers "$k" --acks all | tail -2 | tr '\n' ' '
        echo
      done
    done
    printf 'flush=%-10s consume rf3: ' "$flush"
    "$ISR" perf consume --bootstrap "$BOOT" --topic rf3 --records "$RECORDS" | tail -2 | tr '\n' ' '
    echo
    for pid in $(pgrep -f "isr broker .*$WORK/data"); do
      echo "flush=$flush broker pid $pid peak RSS: $(awk '/VmHWM/ {print $2, $3}' "/proc/$pid/status")"
    done
    stop
  done
}

failover() {
  start always
  "$ISR" topic create t --bootstrap "$BOOT" --partitions 3 --replication-factor 3 --min-insync-replicas 2 >/dev/null
  sleep 1
  local victim
  victim=$(leader_of t 0)
  "$ISR" perf produce --bootstrap "$BOOT" --topic t --records "$RECORDS" --batch 100 \
    --producers 3 --acks all >"$WORK/perf.out" 2>&1 &
  local load=$!
  sleep 2
  kill -9 "$(pgrep -f "isr broker --id $victim .*$WORK/data")"
  local t0 now leader
  t0=$(date +%s%N)
  while true; do
    leader=$(leader_of t 0)
    if [ -n "$leader" ] && [ "$leader" != "$victim" ] && [ "$leader" != None ]; then break; fi
    sleep 0.02
  done
  now=$(date +%s%N)
  echo "killed broker $victim (leader of t/0); status shows leader $leader after $(( (now - t0) / 1000000 )) ms"
  wait "$load"
  echo "under load: $(tail -1 "$WORK/perf.out")  (max = the write that waited out the election)"
  stop
}

large() {
  start page-cache
  for size in ${LARGE_SIZES:-28000 200000 500000}; do
    "$ISR" topic create "large$size" --bootstrap "$BOOT" --partitions 1 --replication-factor 3 \
      --min-insync-replicas 2 >/dev/null
    sleep 1
    printf 'record size %-7s produce: ' "$size"
    "$ISR" perf produce --bootstrap "$BOOT" --topic "large$size" --records "${LARGE_RECORDS:-100}" \
      --record-size "$size" --batch 1 --acks all | tail -2 | tr '\n' ' '
    echo
    printf 'record size %-7s consume: ' "$size"
    "$ISR" perf consume --bootstrap "$BOOT" --topic "large$size" --records "${LARGE_RECORDS:-100}" |
      tail -2 | tr '\n' ' '
    echo
  done
  stop
}

case "${1:-all}" in
  throughput) throughput ;;
  failover) failover ;;
  large) large ;;
  all) throughput; failover; large ;;
  *) echo "usage: $0 [throughput|failover|large|all]" >&2; exit 2 ;;
esac
