"""confluent-kafka (librdkafka) against an isr broker: create a topic with the admin client,
produce with acks=all and idempotence, consume with manual assignment, commit, and resume.

Usage: confluent_roundtrip.py BOOTSTRAP TOPIC. Exits non-zero with a message on failure.
"""
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic = sys.argv[1], sys.argv[2]
COUNT = 20

admin = AdminClient({"bootstrap.servers": bootstrap})
for name, future in admin.create_topics(
    [NewTopic(topic, num_partitions=2, replication_factor=1)], operation_timeout=10
).items():
    future.result(timeout=20)

delivered = []


def on_delivery(err, msg):
    if err is not None:
        sys.exit("delivery failed: %s" % err)
    delivered.append((msg.partition(), msg.offset()))


producer = Producer(
    {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
)
for i in range(COUNT):
    producer.produce(topic, value=b"v%d" % i, partition=0, on_delivery=on_delivery)
producer.produce(topic, key=b"k", value=b"keyed", partition=1, on_delivery=on_delivery)
assert producer.flush(20) == 0, "undelivered messages"
assert sorted(o for p, o in delivered if p == 0) == list(range(COUNT)), delivered


def consume(consumer, want):
    got = []
    for _ in range(100):
        if len(got) >= want:
            break
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            sys.exit("consume error: %s" % msg.error())
        got.append(msg)
    return got


conf = {"bootstrap.servers": bootstrap, "group.id": "roundtrip", "enable.auto.commit": False}
c = Consumer(conf)
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
seen = consume(c, COUNT // 2)[: COUNT // 2]
assert [m.value() for m in seen] == [b"v%d" % i for i in range(COUNT // 2)], seen
c.commit(offsets=[TopicPartition(topic, 0, COUNT // 2)], asynchronous=False)
committed = c.committed([TopicPartition(topic, 0)], timeout=10)
assert committed[0].offset == COUNT // 2, committed
c.close()

# Assigning without an offset resumes from the group's committed one.
c = Consumer(conf)
c.assign([TopicPartition(topic, 0)])
rest = consume(c, COUNT - COUNT // 2)
assert [m.offset() for m in rest] == list(range(COUNT // 2, COUNT)), [m.offset() for m in rest]
c.close()
print("confluent-kafka roundtrip ok")
