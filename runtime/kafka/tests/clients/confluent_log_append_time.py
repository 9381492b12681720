"""confluent-kafka (librdkafka) against an isr cluster: a topic with
message.timestamp.type=LogAppendTime gets the broker's time on every record (in the delivery
report, from the Produce answer, and when consumed), a CreateTime topic keeps the producer's.

Usage: confluent_log_append_time.py BOOTSTRAP. Exits non-zero with a message on failure.
"""
import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1]
PRODUCER_TIME = 1_000_000  # 1970: far from any broker's clock
topics = {"appended": "LogAppendTime", "created": "CreateTime"}

admin = AdminClient({"bootstrap.servers": bootstrap})
futures = admin.create_topics(
    [
        NewTopic(name, num_partitions=1, replication_factor=3,
                 config={"message.timestamp.type": kind})
        for name, kind in topics.items()
    ],
    operation_timeout=10,
)
for future in futures.values():
    future.result(timeout=20)

delivered = {}


def on_delivery(err, msg):
    if err is not None:
        sys.exit("delivery failed: %s" % err)
    delivered[msg.topic()] = msg.timestamp()


before = int(time.time() * 1000) - 60_000
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
for name in topics:
    producer.produce(name, value=b"v", timestamp=PRODUCER_TIME, on_delivery=on_delivery)
assert producer.flush(20) == 0, "undelivered messages"
after = int(time.time() * 1000) + 60_000


def broker_time(stamp, where):
    kind, ts = stamp
    if kind != TIMESTAMP_LOG_APPEND_TIME or not before <= ts <= after:
        sys.exit("%s: expected the broker's time, got %r" % (where, stamp))


broker_time(delivered["appended"], "delivery report")
if delivered["created"] != (TIMESTAMP_CREATE_TIME, PRODUCER_TIME):
    sys.exit("CreateTime delivery report: %r" % (delivered["created"],))

for name in topics:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lat-" + name,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING)])
    msg = None
    deadline = time.time() + 20
    while msg is None and time.time() < deadline:
        msg = consumer.poll(1.0)
    consumer.close()
    if msg is None or msg.error():
        sys.exit("%s: nothing consumed (%r)" % (name, msg and msg.error()))
    if name == "appended":
        broker_time(msg.timestamp(), "consumed")
    elif msg.timestamp() != (TIMESTAMP_CREATE_TIME, PRODUCER_TIME):
        sys.exit("CreateTime consumed: %r" % (msg.timestamp(),))
print("ok")
