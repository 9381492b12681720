"""Static group membership (KIP-345) with confluent-kafka (librdkafka): two members with a
group.instance.id share a topic; one restarts within its session timeout and takes its old
partitions back without a rebalance: the other member's assignment is never revoked.

Usage: confluent_static_member.py BOOTSTRAP TOPIC. Exits non-zero with a message on failure.
"""
import sys
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
PARTITIONS = 4
admin = AdminClient({"bootstrap.servers": bootstrap})
for future in admin.create_topics(
    [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], operation_timeout=10
).values():
    future.result(timeout=20)

events = []


def member(instance):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "statics",
            "group.instance.id": instance,
            "client.id": instance,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )
    c.subscribe(
        [topic],
        on_assign=lambda c, ps: events.append((instance, "assign", sorted(p.partition for p in ps))),
        on_revoke=lambda c, ps: events.append((instance, "revoke", sorted(p.partition for p in ps))),
    )
    return c


def poll_until(consumers, done, what, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.05)
        if done():
            return
    sys.exit("timed out waiting for %s; events %s" % (what, events))


def parts(c):
    return sorted(p.partition for p in c.assignment())


a, b = member("ia"), member("ib")
poll_until(
    [a, b],
    lambda: parts(a) and parts(b) and len(set(parts(a)) | set(parts(b))) == PARTITIONS,
    "both static members to share the partitions",
)
a_parts, b_parts = parts(a), parts(b)
print("shared: a %s, b %s" % (a_parts, b_parts), flush=True)
# Let any trailing callbacks run, then watch a from here on.
for _ in range(20):
    a.poll(0.05)
    b.poll(0.05)
seen = len(events)

# b restarts: a static member's close sends no LeaveGroup, and its successor rejoins under
# the same instance id within the session timeout.
b.close()
b2 = member("ib")
poll_until([a, b2], lambda: parts(b2) == b_parts, "the restarted member to get its partitions back")
for _ in range(20):
    a.poll(0.05)
    b2.poll(0.05)
later = [e for e in events[seen:] if e[0] == "ia"]
if later:
    sys.exit("member a saw a rebalance when b restarted: %s" % later)
if parts(a) != a_parts:
    sys.exit("a's assignment changed from %s to %s" % (a_parts, parts(a)))
a.close()
b2.close()
print("static membership ok: b came back to %s, a kept %s" % (b_parts, a_parts), flush=True)
