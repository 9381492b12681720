"""Real Kafka clients against an isr cluster's compression.type: confluent-kafka (librdkafka)
creates a topic per codec (compression.type uncompressed, gzip, snappy, lz4, zstd), writes each
with a producer that compresses in another codec (so the leader recompresses every batch), and
reads every topic back, in order; kafka-python, whose only built-in codec is gzip, reads the
uncompressed and gzip topics too. A compacted lz4 topic refuses a compressed batch holding a
keyless record (INVALID_RECORD): the broker reads compressed records to check.

Usage: compressed_topics.py BOOTSTRAP. Exits non-zero with a message on failure.
"""
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

bootstrap = sys.argv[1]
TOPIC_CODECS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]
# The producer's codec for each topic: never the topic's own.
PRODUCER_CODECS = {"uncompressed": "zstd", "gzip": "lz4", "snappy": "none", "lz4": "gzip",
                   "zstd": "snappy"}
COUNT = 200

admin = AdminClient({"bootstrap.servers": bootstrap})
topics = [NewTopic("codec-" + c, num_partitions=1, replication_factor=3,
                   config={"compression.type": c}) for c in TOPIC_CODECS]
topics.append(NewTopic("codec-compacted", num_partitions=1, replication_factor=3,
                       config={"compression.type": "lz4", "cleanup.policy": "compact"}))
for future in admin.create_topics(topics, operation_timeout=10).values():
    future.result(timeout=20)

expected = [b"value %d " % i + b"x" * (i % 50) for i in range(COUNT)]
for codec in TOPIC_CODECS:
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "compression.type": PRODUCER_CODECS[codec]})
    for value in expected:
        producer.produce("codec-" + codec, value=value,
                         on_delivery=lambda err, msg: err and errors.append(err))
    producer.flush(30)
    if errors:
        sys.exit("writing codec-%s: %s" % (codec, errors))


def read_with_librdkafka(topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-" + topic,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    while len(values) < COUNT:
        msg = consumer.poll(10)
        if msg is None:
            break
        if msg.error():
            sys.exit("reading %s: %s" % (topic, msg.error()))
        values.append(msg.value())
    consumer.close()
    return values


def read_with_kafka_python(topic):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10000)
    partition = KafkaPythonPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    values = [m.value for m in consumer][:COUNT]
    consumer.close()
    return values


for codec in TOPIC_CODECS:
    got = read_with_librdkafka("codec-" + codec)
    if got != expected:
        sys.exit("librdkafka read codec-%s: %d values, first differing at %s" % (
            codec, len(got), next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                                  min(len(got), COUNT))))
    if codec in ("uncompressed", "gzip"):
        got = read_with_kafka_python("codec-" + codec)
        if got != expected:
            sys.exit("kafka-python read codec-%s: %d values" % (codec, len(got)))

keyless = []
refusing = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                     "compression.type": "gzip", "linger.ms": 5})
refusing.produce("codec-compacted", key=b"k", value=b"keyed")
refusing.produce("codec-compacted", value=b"no key", on_delivery=lambda err, msg: keyless.append(err))
refusing.flush(20)
if not keyless or keyless[0] is None or keyless[0].code() != KafkaError.INVALID_RECORD:
    sys.exit("a compressed keyless record to a compacted topic: expected INVALID_RECORD, got %r"
             % keyless)
print("every codec recompressed and read back by librdkafka (and kafka-python where it can)")
