#!/usr/bin/env bash
# Benchmarks a local isr cluster and prints the figures in the README's performance section.
#
#   runtime/bench/cluster.sh [throughput|failover|controller-failover|metadata|large|tls|commits|retention|compaction|all]
#   runtime/bench/cluster.sh scale [PARTITIONS] [file|etcd]
#   runtime/bench/cluster.sh change-bytes
#
# throughput: for each flush policy, three brokers and a controller on 127.0.0.1, topics with
#   3 partitions at replication factor 1 and 3 (min ISR 2), acks=all, 100-byte records in
#   batches of 100, `isr perf produce` with PRODUCERS concurrent producers (default "3 12");
#   then `isr perf consume`, and each broker's peak resident memory (VmHWM).
# failover: acks=all load on an RF 3 topic, SIGKILL of the leader of partition 0 after 2 s;
#   prints when status first shows a new leader, and the slowest produce request (the
#   acknowledged write that waited out the election).
# controller-failover: two controllers on a local etcd member (isr cluster --controllers 2
#   --etcd, default lease 2 s); SIGKILL of the active controller and, at the same moment, of
#   the leader of partition 0; prints when status first shows the new active controller, and
#   when it shows the new leader that controller elected. Three rounds.
# metadata: topic creations per second (kafka-python's admin client, one CreateTopics at a
#   time, TOPICS topics with RF 3), with the file store and with etcd.
# large: large records on one partition at RF 3 (page cache): LARGE_RECORDS records of each of
#   LARGE_SIZES bytes (default 100 of 28000, 200000 and 500000), written one per request, then
#   read back with `isr perf consume` (1 MiB fetches): records/s, MB/s and fetch latency.
# tls: the cost of security. Three brokers (page cache), an RF 3 topic with 3 partitions (min
#   ISR 2), acks=all, 100-byte records in batches of 100, 3 producers, then a consumer; once
#   each with isr cluster --security plaintext, ssl (TLS listeners and mutual TLS between the
#   brokers, client certificate) and sasl-ssl (TLS, and a SCRAM-SHA-512 login per connection).
# commits: consumer groups' synchronous offset commits (confluent-kafka, each group one consumer
#   committing one partition of a 12-partition RF 3 topic after every "message"), for each
#   flush policy, with COMMITTERS groups at once (default "1 12") for COMMIT_SECS s (default 10):
#   commits per second of the whole cluster, and the CPU time a commit costs the client process
#   and the cluster's processes (their sum over the run, divided by the commits). Each commit
#   is a record in __consumer_offsets, acknowledged once committed (acks=all, min ISR 2).
# retention: does deleting segments hold up writes? Three brokers (flush=always), a topic of 3
#   partitions at RF 3 (min ISR 2) with retention.ms=2000 and segment.ms=200, RETENTION_RECORDS
#   (default 2500000) 100-byte records from 3 producers in batches of 100 (acks=all); once with
#   the default retention check interval (300 s: nothing is deleted during the run) and once
#   with 200 ms. Prints throughput and latency percentiles, the disk used after, and the log
#   start partition 0 reached.
# compaction: does the log cleaner hold up writes? As retention, with records carrying
#   COMPACTION_KEYS (default 1000) keys in turn and a pass every 200 ms, segment.ms=200; once
#   with cleanup.policy=delete and retention.ms=-1 (segments roll, nothing is deleted or
#   cleaned) and once with cleanup.policy=compact (min.cleanable.dirty.ratio COMPACTION_RATIO,
#   default Kafka's 0.5: the cleaner runs whenever that share of the closed segments is dirty).
#   Prints throughput and latency percentiles and the disk used after, for COMPACTION_PAIRS
#   (default 3) such pairs, each pair's p99 ratio (with the cleaner / without) and the median.
# change-bytes: what one ISR change writes to each store (file: bytes appended to the metadata
#   log; etcd: bytes of values), at 1,000 and at 100,000 partitions, with ISR changes per second:
#   the controller store's own benchmark (a local etcd member, no brokers), the ignored test
#   `commit_rates` of runtime/src/controller/store/mod.rs.
# scale [PARTITIONS] [STORE]: three brokers (page cache) and the file store (STORE=file, the
#   default) or three controllers on etcd (STORE=etcd); PARTITIONS (default 100000) partitions
#   as topics of 100 (RF 3, min ISR 2), created through confluent-kafka's admin client, 10
#   topics per CreateTopics. Prints one line per figure: the seconds from the first create to
#   every partition led with a full ISR (as a client's Metadata sees it), and to every partition
#   replicated (its leader counted a Fetch of each follower, as `isr status` shows), and to every
#   partition with a full ISR again after that (stable); the whole cluster's
#   idle CPU over IDLE_WINDOW s (default 10) from IDLE_AFTER s (default 5) after stable, and each
#   process's RSS; the partitions still with a full ISR after it,
#   and 100 acks=all writes to the last topic (one per partition); SIGKILL of broker 3: the seconds until every
#   partition it led has a new leader, then its restart: the seconds until it is back in every ISR; with etcd, SIGKILL of the active controller: the seconds
#   until a topic creation succeeds; and the brokers' controller sessions lost throughout.
# Environment: IDLE_AFTER and IDLE_WINDOW (scale: when and how long idle CPU is measured),
#   KEEP_LOG (a file to keep the cluster's output in), RECORDS (default 2000000), PRODUCERS, TOPICS (default 300), PORT (default 39090), ISR (the binary;
#   default target/release/isr, built if missing). Run on a quiet machine: the brokers, the
#   controller and the load generator share its cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
ISR=${ISR:-target/release/isr}
[ -x "$ISR" ] || cargo build --release -p isr-runtime
RECORDS=${RECORDS:-2000000}
PRODUCERS=${PRODUCERS:-"3 12"}
TOPICS=${TOPICS:-300}
COMMITTERS=${COMMITTERS:-"1 12"}
COMMIT_SECS=${COMMIT_SECS:-10}
PORT=${PORT:-39090}
BOOT=
WORK=$(mktemp -d)
CLUSTER=
RESTARTED=
stop() {
  if [ -n "$RESTARTED" ]; then kill -TERM "$RESTARTED" 2>/dev/null || true; wait "$RESTARTED" 2>/dev/null || true; fi
  RESTARTED=
  if [ -n "$CLUSTER" ]; then kill -TERM "$CLUSTER" 2>/dev/null || true; wait "$CLUSTER" 2>/dev/null || true; fi
  # KEEP_LOG=FILE: every process's log is kept there (the last cluster's, with several).
  if [ -n "${KEEP_LOG:-}" ] && [ -d "$WORK/data" ]; then cluster_logs >"$KEEP_LOG"; fi
  CLUSTER=
}
trap 'stop; rm -rf "$WORK"' EXIT

cluster_logs() { # every controller's and broker's log (isr cluster gives each its own)
  find "$WORK/data" -name log.txt -exec cat {} + 2>/dev/null
}

start() { # start FLUSH [MORE isr cluster ARGUMENTS]
  rm -rf "$WORK/data"
  local flush=$1
  shift
  "$ISR" cluster --brokers 3 --dir "$WORK/data" --port "$PORT" --flush "$flush" "$@" >"$WORK/cluster.out" 2>&1 &
  CLUSTER=$!
  # A secured cluster prints its client config last; a plaintext one, its bootstrap.
  local last='^bootstrap'
  case " $* " in *" --security ssl "* | *" --security sasl-ssl "*) last='^client config' ;; esac
  for _ in $(seq 200); do
    if grep -q "$last" "$WORK/cluster.out" 2>/dev/null; then
      BOOT=$(grep '^bootstrap' "$WORK/cluster.out" | cut -d' ' -f2)
      return
    fi
    sleep 0.1
  done
  echo "the cluster did not start: $(cat "$WORK/cluster.out")" >&2
  exit 1
}

leader_of() { # leader_of TOPIC PARTITION
  "$ISR" status "$1" --bootstrap "$BOOT" --json 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin)['partitions']; print([p for p in r if p['partition']==$2][0]['leader'])" 2>/dev/null || true
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

status_field() { # status_field PYTHON-EXPRESSION-OVER-r (the status --json of topic t)
  "$ISR" status t --bootstrap "$BOOT" --json 2>/dev/null |
    python3 -c "import json,sys; r=json.load(sys.stdin); print($1)" 2>/dev/null || true
}

controller_failover() {
  for round in 1 2 3; do
    start always --controllers 2 --etcd
    "$ISR" topic create t --bootstrap "$BOOT" --partitions 1 --replication-factor 3 --min-insync-replicas 2 >/dev/null
    sleep 2
    local active epoch victim t0 now took_over="" leader=""
    active=$(status_field "r['controller']['id']")
    epoch=$(status_field "r['controller']['epoch']")
    victim=$(leader_of t 0)
    t0=$(date +%s%N)
    kill -9 "$(pgrep -f "isr controller --id $active .*--listen 127.0.0.1:$((PORT + active - 1))")" \
      "$(pgrep -f "isr broker --id $victim .*$WORK/data")"
    while [ -z "$leader" ]; do
      now=$(date +%s%N)
      if [ -z "$took_over" ] && [ "$(status_field "r['controller']['epoch'] > $epoch")" = True ]; then
        took_over=$(( (now - t0) / 1000000 ))
      fi
      local l
      l=$(leader_of t 0)
      if [ -n "$took_over" ] && [ -n "$l" ] && [ "$l" != "$victim" ] && [ "$l" != None ]; then
        leader=$l
      fi
      if [ $(( (now - t0) / 1000000000 )) -gt 30 ]; then echo "round $round: no failover in 30 s" >&2; break; fi
      sleep 0.02
    done
    now=$(date +%s%N)
    echo "round $round: killed controller $active and broker $victim (leader of t/0); the standby was active after ${took_over} ms, and had elected broker $leader after $(( (now - t0) / 1000000 )) ms"
    stop
  done
}

metadata() {
  for store in file etcd; do
    if [ "$store" = file ]; then start always; else start always --controllers 2 --etcd; fi
    sleep 1
    printf 'store=%s: ' "$store"
    python3 - "$BOOT" "$TOPICS" <<'PY'
import sys, time
from kafka.admin import KafkaAdminClient, NewTopic
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1].split(","))
n = int(sys.argv[2])
started = time.monotonic()
for i in range(n):
    admin.create_topics([NewTopic(f"m{i}", 1, 3)])
secs = time.monotonic() - started
print(f"{n} topic creations (RF 3) in {secs:.2f} s: {n / secs:.0f} per second")
PY
    stop
  done
}

commits() {
  for flush in page-cache always; do
    start "$flush"
    "$ISR" topic create c --bootstrap "$BOOT" --partitions 12 --replication-factor 3 --min-insync-replicas 2 >/dev/null
    sleep 1
    for k in $COMMITTERS; do
      printf 'flush=%-10s groups=%-3s ' "$flush" "$k"
      local before after
      before=$(cpu_ticks)
      python3 - "$BOOT" "$k" "$COMMIT_SECS" "$WORK/commits" <<'PY'
import sys, threading, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, k, secs, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
cpu = time.process_time()  # the whole client process: Python and librdkafka's threads
counts = [0] * k
def commit(i):
    # One consumer per group, each committing one partition synchronously, as an application
    # that commits after every message would.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{k}-{i}",
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("c", i % 12, 1)], asynchronous=False)  # warm up
    end = time.monotonic() + secs
    n = 0
    while time.monotonic() < end:
        n += 1
        c.commit(offsets=[TopicPartition("c", i % 12, n)], asynchronous=False)
    counts[i] = n
    c.close()
threads = [threading.Thread(target=commit, args=(i,)) for i in range(k)]
for t in threads: t.start()
for t in threads: t.join()
total = sum(counts)
print(f"{total} synchronous commits in {secs:.0f} s: {total / secs:.0f} per second; "
      f"client CPU {(time.process_time() - cpu) * 1e6 / total:.0f} us a commit", end="")
open(out, "w").write(str(total))
PY
      after=$(cpu_ticks)
      # The whole cluster's CPU per commit (brokers and controller, warm-up included).
      echo "; cluster CPU $(( (after - before) * 1000000 / $(getconf CLK_TCK) / $(cat "$WORK/commits") )) us a commit"
    done
    stop
  done
}

retention() {
  for interval in 300000 200; do
    start always --log-retention-check-interval-ms "$interval"
    "$ISR" topic create lat --bootstrap "$BOOT" --partitions 3 --replication-factor 3 \
      --min-insync-replicas 2 --config retention.ms=2000 --config segment.ms=200 >/dev/null
    printf 'retention check every %-6s ms: ' "$interval"
    "$ISR" perf produce --bootstrap "$BOOT" --topic lat --records "${RETENTION_RECORDS:-2500000}" \
      --record-size 100 --producers 3 --batch 100 | tail -2 | tr '\n' ' '
    local start
    start=$("$ISR" status lat --bootstrap "$BOOT" 2>&1 | grep -o 'log start [0-9]*' | head -1)
    echo "disk after $(du -sh "$WORK/data" | cut -f1); partition 0's $start"
    stop
  done
}

compaction() {
  # Pairs of runs, without and with the cleaner, one after the other: a single p99 on this
  # machine moves by half from run to run, so the ratio is judged by the median pair.
  local pair ratios=()
  for pair in $(seq "${COMPACTION_PAIRS:-3}"); do
    local out without with
    out=$(compaction_pair)
    echo "$out"
    without=$(echo "$out" | sed -n '1s/.* p99 \([0-9.]*\) .*/\1/p')
    with=$(echo "$out" | sed -n '2s/.* p99 \([0-9.]*\) .*/\1/p')
    ratios+=("$(awk -v a="$without" -v b="$with" 'BEGIN { printf "%.2f", b / a }')")
    echo "pair $pair: p99 with the cleaner / without: ${ratios[-1]}x"
  done
  printf '%s\n' "${ratios[@]}" | sort -n |
    awk '{ r[NR] = $1 } END { printf "median p99 ratio over %d pairs: %.2fx\n", NR, r[int((NR + 1) / 2)] }'
}

compaction_pair() {
  local policy
  for policy in "delete --config retention.ms=-1" compact; do
    # shellcheck disable=SC2086 # CLEANER_IO_MAX (bytes a second) paces the cleaner
    start always --log-retention-check-interval-ms 200 \
      ${CLEANER_IO_MAX:+--log-cleaner-io-max-bytes-per-second $CLEANER_IO_MAX}
    # shellcheck disable=SC2086 # the policy's words are separate arguments
    "$ISR" topic create lat --bootstrap "$BOOT" --partitions 3 --replication-factor 3 \
      --min-insync-replicas 2 --config cleanup.policy=$policy --config segment.ms=200 \
      --config min.cleanable.dirty.ratio="${COMPACTION_RATIO:-0.5}" >/dev/null
    printf 'cleanup.policy=%-8s ' "${policy%% *}"
    "$ISR" perf produce --bootstrap "$BOOT" --topic lat --records "${RETENTION_RECORDS:-2500000}" \
      --record-size 100 --producers 3 --batch 100 --keys "${COMPACTION_KEYS:-1000}" \
      | tail -2 | tr '\n' ' '
    echo "disk after $(du -sh "$WORK/data" | cut -f1)"
    stop
  done
}

tls() {
  for security in plaintext ssl sasl-ssl; do
    start page-cache --security "$security"
    local config=()
    if [ "$security" != plaintext ]; then
      config=(--command-config "$(grep '^client config' "$WORK/cluster.out" | cut -d' ' -f3)")
    fi
    "$ISR" topic create rf3 --bootstrap "$BOOT" --partitions 3 --replication-factor 3 \
      --min-insync-replicas 2 "${config[@]}" >/dev/null
    sleep 1
    printf 'security=%-9s produce rf3: ' "$security"
    "$ISR" perf produce --bootstrap "$BOOT" --topic rf3 --records "$RECORDS" --record-size 100 \
      --batch 100 --producers 3 --acks all "${config[@]}" | tail -2 | tr '\n' ' '
    echo
    printf 'security=%-9s consume rf3: ' "$security"
    "$ISR" perf consume --bootstrap "$BOOT" --topic rf3 --records "$RECORDS" "${config[@]}" |
      tail -2 | tr '\n' ' '
    echo
    stop
  done
}

scale_client() { # scale_client PHASE ARGS...: the Kafka-client side of `scale`, in Python
  python3 - "$BOOT" "$@" <<'PY'
import sys, time
from confluent_kafka.admin import AdminClient, NewTopic
boot, phase, args = sys.argv[1], sys.argv[2], sys.argv[3:]
admin = AdminClient({"bootstrap.servers": boot})

def partitions():
    md = admin.list_topics(timeout=30)
    return [(t.topic, p.id, p.leader, len(p.isrs)) for t in md.topics.values()
            if t.topic.startswith("s") for p in t.partitions.values()]

def full_isr():
    return sum(1 for (_, _, leader, isr) in partitions() if leader >= 0 and isr == 3)

def wait_full(total, limit, pause):
    """Waits until every partition is led with a full ISR: (True, total), or (False, how many
    are) after `limit` seconds."""
    started = time.monotonic()
    while True:
        full = full_isr()
        if full >= total:
            return True, full
        if time.monotonic() - started > limit:
            return False, full
        time.sleep(pause)

def require_full(total, limit, pause, failed):
    """Waits as wait_full does; if not every partition is led with a full ISR within `limit`
    seconds, prints `failed(how many are)` and fails."""
    done, full = wait_full(total, limit, pause)
    if not done:
        print(failed(full))
        sys.exit(1)

if phase == "create":
    total = int(args[0])
    started = time.monotonic()
    names = [f"s{i}" for i in range(total // 100)]
    for i in range(0, len(names), 10):
        topics = [NewTopic(n, 100, 3, config={"min.insync.replicas": "2"}) for n in names[i:i + 10]]
        for name, f in admin.create_topics(topics, request_timeout=120).items():
            f.result()
    created = time.monotonic() - started
    require_full(total, 900, 1,
                 lambda full: f"not stable after 900 s: {full} of {total} partitions led with a full ISR")
    print(f"partitions={total}: created in {created:.1f} s; every partition led with a full ISR "
          f"{time.monotonic() - started:.1f} s after the first create")
elif phase == "check":
    total = int(args[0])
    full = full_isr()
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": boot, "acks": "all"})
    acked = []
    last = f"s{total // 100 - 1}"
    started = time.monotonic()
    for p in range(100):
        producer.produce(last, b"x", partition=p,
                         on_delivery=lambda err, msg: acked.append(err is None))
    producer.flush(60)
    print(f"after the idle window: {full} of {total} partitions with a full ISR; "
          f"{sum(acked)} of 100 acks=all writes to {last} acknowledged in "
          f"{time.monotonic() - started:.2f} s")
elif phase == "led-by":
    print(" ".join(f"{t}/{p}" for (t, p, leader, _) in partitions() if leader == int(args[0])))
elif phase == "moved":
    victim, led = int(args[0]), set(args[1:])
    started = time.monotonic()
    while True:
        rows = {f"{t}/{p}": leader for (t, p, leader, _) in partitions()}
        left = [k for k in led if rows.get(k, -1) in (-1, victim)]
        if not left:
            break
        if time.monotonic() - started > 300:
            print(f"after 300 s, {len(left)} of {len(led)} partitions still without a new leader")
            sys.exit(1)
        time.sleep(0.05)
    print(f"SIGKILL of broker {victim}: all {len(led)} partitions it led had a new leader "
          f"after {time.monotonic() - started:.2f} s")
elif phase == "rejoined":
    total, victim = int(args[0]), int(args[1])
    started = time.monotonic()
    require_full(total, 300, 0.5,
                 lambda full: f"after 300 s, {total - full} of {total} partitions still without broker {victim} in the ISR")
    print(f"restart of broker {victim}: back in every ISR after {time.monotonic() - started:.1f} s")
elif phase == "stable":
    total, since = int(args[0]), float(args[1])
    require_full(total, 300, 1,
                 lambda full: f"not stable 300 s after replicating: {full} of {total} partitions with a full ISR")
    print(f"every partition led with a full ISR again (stable) {time.time() - since:.1f} s "
          f"after the first create")
elif phase == "create-one":
    started = time.monotonic()
    while True:
        f = admin.create_topics([NewTopic(args[0], 1, 3)], request_timeout=5)[args[0]]
        try:
            f.result()
            break
        except Exception:
            if time.monotonic() - started > 120:
                print("no topic creation succeeded within 120 s")
                sys.exit(1)
            time.sleep(0.05)
    print(f"a topic creation succeeded {time.monotonic() - started:.2f} s after the kill")
PY
}

cpu_ticks() { # the user+system clock ticks of every process of the cluster (its children) so far
  local total=0 pid
  for pid in $(pgrep -P "$CLUSTER"); do
    total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat") ))
  done
  echo "$total"
}

scale_replicating() { # scale_replicating TOTAL: waits until the brokers replicate every partition
  # The controller's metadata shows a full ISR at once (a new partition's ISR is its replicas,
  # as in Kafka); the brokers open each replica's files after. Ready: every partition's leader
  # leads it and has counted a Fetch of each follower, as `isr status` shows.
  "$ISR" status --json --bootstrap "$BOOT" 2>/dev/null | python3 -c '
import json, sys
total = int(sys.argv[1])
status = json.load(sys.stdin)
ready = 0
for p in status["partitions"]:
    if not p["topic"].startswith("s"):
        continue
    leader = [r for r in p["replicas"] if r["role"] == "leader"]
    followers = [r for r in p["replicas"] if r["role"].startswith("follower of")]
    if len(leader) == 1 and len(followers) == 2 and all(r["leader_view"] is not None for r in followers):
        ready += 1
sys.exit(0 if ready >= total else 1)
' "$1"
}

scale() {
  local total=${1:-100000} store=${2:-file}
  if [ "$store" = etcd ]; then start page-cache --controllers 3 --etcd; else start page-cache; fi
  echo "store=$store"
  local created_at waited
  created_at=$(date +%s.%N)
  scale_client create "$total"
  waited=0
  until scale_replicating "$total"; do
    sleep 2
    waited=$((waited + 2))
    if [ "$waited" -gt 600 ]; then echo "the brokers did not replicate every partition within 600 s"; break; fi
  done
  echo "every partition replicated (a leader that counted both followers' fetches) $(python3 -c "import time; print(f'{time.time() - $created_at:.1f}')") s after the first create"
  # Leaders drop followers that are slow to open their files from the ISR, and take them back
  # once they fetch: idle is measured once every ISR is full again.
  scale_client stable "$total" "$created_at"
  local before after hz
  hz=$(getconf CLK_TCK)
  sleep "${IDLE_AFTER:-5}"
  before=$(cpu_ticks)
  sleep "${IDLE_WINDOW:-10}"
  after=$(cpu_ticks)
  echo "idle CPU of the whole cluster over ${IDLE_WINDOW:-10} s, ${IDLE_AFTER:-5} s after stable: $(( (after - before) * 100 / hz / ${IDLE_WINDOW:-10} ))% of one core"
  local pid
  for pid in $(pgrep -P "$CLUSTER"); do
    echo "RSS $(awk '/VmRSS/ {print $2, $3}' "/proc/$pid/status"): $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-40)"
  done
  scale_client check "$total"
  local led victim
  led=$(scale_client led-by 3)
  victim=$(pgrep -f "isr broker --id 3 .*$WORK/data")
  local -a again
  mapfile -d '' again <"/proc/$victim/cmdline"
  local broker_killed_at controller_killed_at
  broker_killed_at=$(date -u +%Y-%m-%dT%H:%M:%S.%N)
  kill -9 "$victim"
  # shellcheck disable=SC2086
  scale_client moved 3 $led
  # The same command line again, as an operator restarting it would.
  "${again[@]}" >>"$WORK/data/broker-3/log.txt" 2>&1 &
  RESTARTED=$!
  scale_client rejoined "$total" 3
  if [ "$store" = etcd ]; then
    local active
    active=$("$ISR" status s0 --bootstrap "$BOOT" --json 2>/dev/null |
      python3 -c "import json,sys; print(json.load(sys.stdin)['controller']['id'])")
    controller_killed_at=$(date -u +%Y-%m-%dT%H:%M:%S.%N)
    kill -9 "$(pgrep -f "isr controller --id $active .*--listen 127.0.0.1:$((PORT + active - 1))")"
    scale_client create-one after-failover
  fi
  sessions_lost "$broker_killed_at" "${controller_killed_at:-9}"
  stop
}

# sessions_lost BROKER_KILLED_AT [CONTROLLER_KILLED_AT]: the controller sessions that healthy
# brokers lost, from the logs in time order. Not counted: broker 3's after its SIGKILL (its
# session expires, and its restart registers again), a broker's first heartbeat before it has
# registered, and the sessions the active controller's SIGKILL moves to its successor.
sessions_lost() {
  cluster_logs | sort | awk -v bk="$1" -v ck="${2:-9}" '
    function broker() { return match($0, /broker=b[0-9]+/) ? substr($0, RSTART + 8, RLENGTH - 8) : "" }
    function healthy(b) { return b != 3 || $1 < bk }
    /broker registered/ { registered[broker()] = 1 }
    /session expired: broker fenced/ { if (healthy(broker())) expired++ }
    /heartbeat from a fenced broker/ { b = broker(); if (registered[b] && healthy(b)) refenced++ }
    /lost the session with the controller|the controller answers no heartbeat/ {
      if ($1 < ck) own++; else moved++
    }
    END {
      printf "controller sessions lost by healthy brokers: %d (expired at the controller: %d, " \
        "fenced brokers asked to register again: %d, lost as the brokers saw it: %d)", \
        expired + refenced + own, expired, refenced, own
      if (moved) printf "; moved to the next controller by the SIGKILL of the active one: %d", moved
      print ""
    }'
}

case "${1:-all}" in
  throughput) throughput ;;
  failover) failover ;;
  controller-failover) controller_failover ;;
  metadata) metadata ;;
  large) large ;;
  tls) tls ;;
  commits) commits ;;
  retention) retention ;;
  compaction) compaction ;;
  change-bytes) cargo test --release -p isr-runtime --lib commit_rates -- --ignored --nocapture 2>&1 |
    grep -E '^(file|etcd) store' ;;
  scale) scale "${2:-100000}" "${3:-file}" ;;
  all) throughput; failover; controller_failover; metadata; large; tls; commits ;;
  *) echo "usage: $0 [throughput|failover|controller-failover|metadata|large|tls|commits|retention|compaction|change-bytes|scale [PARTITIONS] [file|etcd]|all]" >&2; exit 2 ;;
esac
