"""kafka-python against an isr broker: create a topic, produce (idempotent, acks=all),
consume from the beginning with manual assignment, commit, and resume from the commit.

Usage: kafka_python_roundtrip.py BOOTSTRAP TOPIC. Exits non-zero with a message on failure.
"""
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
COUNT = 20

admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(name=topic, num_partitions=2, replication_factor=1)])
admin.close()

# kafka-python 3.x enables the idempotent producer by default: this exercises InitProducerId.
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
futures = [producer.send(topic, value=b"v%d" % i, partition=0) for i in range(COUNT)]
offsets = [f.get(timeout=20).offset for f in futures]
assert offsets == list(range(COUNT)), offsets
producer.send(topic, key=b"k", value=b"keyed", partition=1).get(timeout=20)
producer.close()

tp = TopicPartition(topic, 0)


def consumer():
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id="roundtrip",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
    )
    c.assign([tp])
    return c


c = consumer()
seen = []
while len(seen) < COUNT // 2:
    for records in c.poll(timeout_ms=1000, max_records=COUNT // 2 - len(seen)).values():
        seen.extend(records)
assert [r.value for r in seen] == [b"v%d" % i for i in range(COUNT // 2)], seen
assert [r.offset for r in seen] == list(range(COUNT // 2))
c.commit()
assert c.committed(tp) == COUNT // 2, c.committed(tp)
c.close()

# A new consumer of the same group resumes at the committed offset.
c = consumer()
rest = []
while len(rest) < COUNT - COUNT // 2:
    for records in c.poll(timeout_ms=1000).values():
        rest.extend(records)
assert [r.offset for r in rest] == list(range(COUNT // 2, COUNT)), [r.offset for r in rest]
c.close()

# Subscribing as a group member (JoinGroup/SyncGroup): every record once, then, after the
# member's commits, nothing for its successor.
def member():
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="subscribers",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )


c = member()
values = sorted(r.value for r in c)
c.commit()
c.close()
assert values == sorted([b"v%d" % i for i in range(COUNT)] + [b"keyed"]), values
c = member()
assert [r.value for r in c] == [], "the group's successor re-read committed records"
c.close()
print("kafka-python roundtrip ok")
