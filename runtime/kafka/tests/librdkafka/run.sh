#!/usr/bin/env bash
# Runs librdkafka's own integration tests (its tests/test-runner) against a 3-broker isr
# cluster started here, and prints one PASS/FAIL/SKIP line per test and a total.
#
#   LIBRDKAFKA_SRC=/path/to/librdkafka runtime/kafka/tests/librdkafka/run.sh
#   TESTS="0113 0118" LIBRDKAFKA_SRC=... runtime/kafka/tests/librdkafka/run.sh
#
# Environment:
#   LIBRDKAFKA_SRC      librdkafka source tree (required); built here if tests/test-runner is missing
#   TESTS               space- or comma-separated test numbers (default: the group-related list)
#   SUBTESTS            passed to the runner: only sub-tests whose name contains it
#   ISR                 the isr binary (default: target/release/isr of this workspace)
#   TEST_TIMEOUT        seconds allowed per test (default 900)
#   TEST_RUNNER_ARGS    extra test-runner flags (default: -p1; add -Q for quick mode)
#   TEST_KAFKA_VERSION  the broker version the harness assumes (default 3.7.0)
#   GROUP_INITIAL_DELAY_MS  the brokers' group.initial.rebalance.delay.ms (default 3000, Kafka's)
#   TIMEOUT_MULTIPLIER  the runner's test.timeout.multiplier (librdkafka's knob for slow machines:
#                       it scales each test's own time limit, e.g. 0081's 180 s, and its waits)
#   ACLS=true           brokers with ACLs on and User:ANONYMOUS (every plaintext client) a super
#                       user: the ACL sub-tests of 0081 create, list and delete ACLs, which a
#                       broker without ACLs refuses
#   AUTO_CREATE=false   brokers that do not create topics on Metadata, and the runner's
#                       `noautocreate` scenario (0107, and 0045's variants need it)
# Tests that create topics with Kafka's shell tool (0052, 0077) get bin/kafka-topics.sh here, a
# stand-in that runs `isr topic create` (KAFKA_PATH and BROKERS are set for it).
#   KEEP_DIR=1          keep the cluster's directory (broker logs, test logs) even if all pass
# Builds run under `flock /tmp/isr-build.lock` with make -j2.
set -euo pipefail

# Tests of consumer groups (subscribe, rebalances, commits, group admin) that use a broker.
# Left out: 0061 and 0137, whose last sub-tests need transactions (isr has none); their other
# sub-tests pass (see README.md).
DEFAULT_TESTS="0018 0019 0020 0026 0029 0030 0033 0040 0042 0045 0050 0056 0060 0069 0089
0091 0093 0099 0102 0112 0113 0118 0122 0130 0132 0140"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../../.." && pwd)
ISR=${ISR:-$root/target/release/isr}
TESTS=${TESTS:-$DEFAULT_TESTS}
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
TEST_RUNNER_ARGS=${TEST_RUNNER_ARGS:--p1}
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.7.0}

if [[ -z "${LIBRDKAFKA_SRC:-}" || ! -f "${LIBRDKAFKA_SRC:-/nonexistent}/tests/test.c" ]]; then
    echo "error: set LIBRDKAFKA_SRC to a librdkafka source tree (with tests/test.c)," >&2
    echo "  e.g. git --git-dir=/work/.mirror/confluentinc+librdkafka/repo archive HEAD | tar -x -C DIR" >&2
    exit 2
fi
[[ -x "$ISR" ]] || { echo "error: no isr binary at $ISR (cargo build --release -p isr-runtime, or set ISR)" >&2; exit 2; }
src=$(cd "$LIBRDKAFKA_SRC" && pwd)

# Build librdkafka and the test runner once, without optional dependencies.
if [[ ! -x "$src/tests/test-runner" ]]; then
    echo "building librdkafka and its test runner in $src"
    (
        cd "$src"
        if [[ ! -f Makefile.config ]]; then
            flock /tmp/isr-build.lock ./configure --no-download --disable-zstd \
                --disable-gssapi --disable-curl --disable-lz4-ext
        fi
        flock /tmp/isr-build.lock make -j2 libs
        flock /tmp/isr-build.lock make -j2 -C tests build
    )
fi

# Four free consecutive ports: the controller and three brokers.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=
for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 30000))
    if port_free "$p" && port_free $((p + 1)) && port_free $((p + 2)) && port_free $((p + 3)); then
        port=$p
        break
    fi
done
[[ -n "$port" ]] || { echo "error: no free ports found" >&2; exit 2; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/isr-librdkafka.XXXXXX")
mkdir -p "$dir/test-logs"
cluster_pid=
failed=0
cleanup() {
    if [[ -n "$cluster_pid" ]] && kill -0 "$cluster_pid" 2>/dev/null; then
        kill -TERM "$cluster_pid" 2>/dev/null || true
        wait "$cluster_pid" 2>/dev/null || true
    fi
    if [[ "$failed" == 0 && "${KEEP_DIR:-0}" != 1 ]]; then
        rm -rf "$dir"
    else
        echo "cluster directory (broker logs: broker-*/log.txt, test logs: test-logs/): $dir"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The settings of librdkafka's default test scenario (tests/scenarios/default.json, on trivup):
# auto-created topics with 4 partitions,
# replication factor 3 on 3 brokers, Kafka's default group.initial.rebalance.delay.ms (3 s; the
# tests count rebalances and expect consumers started together to share the first generation).
"$ISR" cluster --dir "$dir" --brokers 3 --port "$port" --flush page-cache \
    --auto-create-topics "${AUTO_CREATE:-true}" --num-partitions 4 --default-replication-factor 3 \
    --group-initial-rebalance-delay-ms "${GROUP_INITIAL_DELAY_MS:-3000}" \
    ${ACLS:+$([[ "$ACLS" == true ]] && echo --acls --super-user User:ANONYMOUS)} \
    >"$dir/cluster.out" 2>&1 &
cluster_pid=$!
bootstrap="127.0.0.1:$((port + 1)),127.0.0.1:$((port + 2)),127.0.0.1:$((port + 3))"
for _ in $(seq 1 100); do
    if ! port_free $((port + 1)) && ! port_free $((port + 2)) && ! port_free $((port + 3)) &&
        "$ISR" topic list --bootstrap "$bootstrap" >/dev/null 2>&1; then
        break
    fi
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$dir/cluster.out" >&2; exit 1; }
    sleep 0.2
done
echo "isr cluster: bootstrap $bootstrap, dir $dir"

conf="$dir/test.conf"
echo "bootstrap.servers=$bootstrap" >"$conf"
if [[ -n "${TIMEOUT_MULTIPLIER:-}" ]]; then
    echo "test.timeout.multiplier=$TIMEOUT_MULTIPLIER" >>"$conf"
fi
export RDKAFKA_TEST_CONF=$conf
export KAFKA_PATH=$here BROKERS=$bootstrap ISR
if [[ "${AUTO_CREATE:-true}" == false ]]; then
    TEST_RUNNER_ARGS="$TEST_RUNNER_ARGS -s noautocreate"
fi
export LD_LIBRARY_PATH=$src/src:$src/src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

pass=0
fail=0
skip=0
start_all=$SECONDS
for t in ${TESTS//,/ }; do
    log="$dir/test-logs/$t.log"
    start=$SECONDS
    rc=0
    # shellcheck disable=SC2086
    (cd "$src/tests" && TESTS=$t timeout -k 10 "$TEST_TIMEOUT" ./test-runner $TEST_RUNNER_ARGS) \
        >"$log" 2>&1 || rc=$?
    secs=$((SECONDS - start))
    # The runner's summary table: one row per test (number_name) it ran, skipped or failed.
    rows=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | awk -F'|' '/^\| [0-9][0-9][0-9][0-9]_/ {gsub(/ /, "", $2); gsub(/ /, "", $3); print $2 ":" $3}')
    if [[ $rc == 124 || $rc == 137 ]]; then
        status=FAIL why="timeout after ${TEST_TIMEOUT}s"
    elif [[ $rc != 0 ]]; then
        reason=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a -A1 '^### Test "0' | grep -av '^###\|^--' | head -1 || true)
        status=FAIL why="rc=$rc: ${reason:-see log}"
    elif [[ -n "$rows" ]] && ! grep -qv ':SKIPPED$' <<<"$rows"; then
        status=SKIP why="$(echo $rows)"
    else
        status=PASS why="$(echo $rows)"
    fi
    case $status in
        PASS) pass=$((pass + 1)) ;;
        FAIL) fail=$((fail + 1)); failed=1 ;;
        SKIP) skip=$((skip + 1)) ;;
    esac
    printf '%-5s %s %4ss  %s\n' "$t" "$status" "$secs" "$why"
done
printf 'total: %d passed, %d failed, %d skipped in %ss (librdkafka %s, logs %s)\n' \
    "$pass" "$fail" "$skip" "$((SECONDS - start_all))" \
    "$(sed -n 's/^RDKAFKA_VERSION_STR=[[:space:]]*//p' "$src/Makefile.config" 2>/dev/null)" \
    "$dir/test-logs"
[[ $fail == 0 ]]
