"""A confluent-kafka group member rides out the loss of its group coordinator.

Usage: confluent_coordinator_failover.py BOOTSTRAP TOPIC GROUP. The member subscribes, reads
and commits a first batch, prints "ready", and waits for a line on stdin (meanwhile the test
kills the coordinator broker). It then writes a second batch and must read all of it: it finds
the new coordinator (the new leader of the group's `__consumer_offsets` partition, which
replicated the commits and the group's membership) and carries on in its generation: no
rebalance (its partitions are assigned once), and its next commit is accepted at once. Exits
non-zero with a message on failure.
"""
import sys
import time

from confluent_kafka import Consumer, Producer

bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})


def produce(values):
    for v in values:
        producer.produce(topic, value=v.encode())
    if producer.flush(60) != 0:
        sys.exit("undelivered messages")


def read(consumer, want, what, timeout=60):
    seen = set()
    deadline = time.time() + timeout
    while time.time() < deadline and not want <= seen:
        msg = consumer.poll(0.2)
        if msg is None or msg.error():
            continue
        seen.add(msg.value().decode())
    if not want <= seen:
        sys.exit("%s: missing %s" % (what, sorted(want - seen)[:10]))
    return seen


consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }
)
assigned = []
consumer.subscribe([topic], on_assign=lambda c, parts: assigned.append(len(parts)))
first = {"first-%d" % i for i in range(30)}
produce(sorted(first))
read(consumer, first, "before the coordinator's loss")
consumer.commit(asynchronous=False)
print("ready", flush=True)
sys.stdin.readline()

second = {"second-%d" % i for i in range(30)}
produce(sorted(second))
seen = read(consumer, second, "after the coordinator's loss")
if seen & first:
    sys.exit("re-read committed records: %s" % sorted(seen & first)[:10])
# The commit may wait for the new coordinator (librdkafka retries NOT_COORDINATOR and
# COORDINATOR_LOAD_IN_PROGRESS itself), but must not be refused: the member's generation is
# the one the new coordinator loaded.
consumer.commit(asynchronous=False)
if len(assigned) != 1:
    sys.exit("the group rebalanced after the coordinator's loss: assignments %s" % assigned)
consumer.close()
print("coordinator failover ok", flush=True)
