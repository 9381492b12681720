"""confluent-kafka (librdkafka) consumers subscribing as a group: two members share a topic's
partitions, the survivor takes over when one leaves, and a new member resumes from the group's
committed offsets.

Usage: confluent_group.py BOOTSTRAP TOPIC. Exits non-zero with a message on failure.
"""
import sys
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
PARTITIONS = 4
admin = AdminClient({"bootstrap.servers": bootstrap})
for future in admin.create_topics(
    [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], operation_timeout=10
).values():
    future.result(timeout=20)

producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})


def produce(values):
    for i, v in enumerate(values):
        producer.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    assert producer.flush(20) == 0, "undelivered messages"


def member(name):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "members",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )


def poll_until(consumers, done, what, timeout=60):
    """Polls every consumer in turn until done(seen) holds; seen maps name -> values."""
    seen = {name: [] for name in consumers}
    deadline = time.time() + timeout
    while time.time() < deadline:
        for name, c in consumers.items():
            msg = c.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().fatal():
                    sys.exit("%s: fatal consume error %s" % (name, msg.error()))
                continue
            seen[name].append(msg.value().decode())
        if done(seen):
            return seen
    sys.exit("timed out waiting for %s; seen %s; assignments %s" % (
        what, {n: len(v) for n, v in seen.items()},
        {n: [p.partition for p in c.assignment()] for n, c in consumers.items()}))


a, b = member("a"), member("b")
a.subscribe([topic])
b.subscribe([topic])


def shared(seen):
    parts = {n: {p.partition for p in c.assignment()} for n, c in (("a", a), ("b", b))}
    return (
        parts["a"] and parts["b"] and not parts["a"] & parts["b"]
        and len(parts["a"] | parts["b"]) == PARTITIONS
    )


poll_until({"a": a, "b": b}, lambda seen: shared(seen), "both members to share the partitions")
# Both are assigned, disjointly: what is written now is read once, by one of them.
first = ["a%d" % i for i in range(40)]
produce(first)
seen = poll_until(
    {"a": a, "b": b},
    lambda seen: len(seen["a"]) + len(seen["b"]) >= len(first) and shared(seen),
    "the first records",
)
together = sorted(seen["a"] + seen["b"])
if together != sorted(first):
    sys.exit("the two members read %s, not each record once" % together)
a.commit(asynchronous=False)
b.commit(asynchronous=False)
print("shared: a read %d, b read %d" % (len(seen["a"]), len(seen["b"])), flush=True)

# a leaves: b takes over all partitions (nothing is left to read: both committed) and then
# reads what comes next, each record once.
a.close()
poll_until({"b": b}, lambda seen: len(b.assignment()) == PARTITIONS, "b to take over")
second = ["b%d" % i for i in range(20)]
produce(second)
seen = poll_until({"b": b}, lambda seen: len(seen["b"]) >= len(second), "b to read on")
if sorted(seen["b"]) != sorted(second):
    sys.exit("after a left, b read %s" % sorted(seen["b"]))
b.commit(asynchronous=False)
b.close()
print("taken over: b read %d" % len(seen["b"]), flush=True)

# A new member starts where the group committed: only records produced after.
c = member("c")
c.subscribe([topic])
poll_until({"c": c}, lambda seen: len(c.assignment()) == PARTITIONS, "c to be assigned")
third = ["c%d" % i for i in range(8)]
produce(third)
seen = poll_until({"c": c}, lambda seen: len(seen["c"]) >= len(third), "c to resume")
time.sleep(0.5)
while True:
    msg = c.poll(0.2)
    if msg is None:
        break
    if not msg.error():
        seen["c"].append(msg.value().decode())
c.close()
if sorted(seen["c"]) != sorted(third):
    sys.exit("the new member read %s, not only what came after the commits" % sorted(seen["c"]))
print("confluent-kafka group ok", flush=True)
