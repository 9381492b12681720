"""Real Kafka clients against an isr cluster's compacted topic: confluent-kafka (librdkafka)
creates it (cleanup.policy=compact) and writes keys in rounds, a keyless record is refused
(INVALID_RECORD), and so is a batch with keyless records among keyed ones, each named; once the
brokers' cleaners ran, confluent-kafka and kafka-python each read the partition from its start
to its end across the gaps and the emptied batches the cleaner left, and end with every key's
latest value.

Usage: compacted_topic.py BOOTSTRAP. Exits non-zero with a message on failure.
"""
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

bootstrap = sys.argv[1]
TOPIC = "compacted"
KEYS = [b"a", b"b", b"c", b"d"]
ROUNDS = 10

admin = AdminClient({"bootstrap.servers": bootstrap})
config = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
for future in admin.create_topics(
    [NewTopic(TOPIC, num_partitions=1, replication_factor=3, config=config)],
    operation_timeout=10,
).values():
    future.result(timeout=20)

errors = []


def on_delivery(err, msg):
    if err is not None:
        errors.append(err)


# One batch per record (linger 0, flushed one at a time), rounds 150 ms apart: segments roll
# by record time, so all but the last rounds land in segments the cleaner may clean.
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
for round_ in range(ROUNDS):
    for key in KEYS:
        producer.produce(TOPIC, key=key, value=key + b"%d" % round_, on_delivery=on_delivery)
        producer.flush(20)
    time.sleep(0.15)
if errors:
    sys.exit("delivery failed: %s" % errors)
written = ROUNDS * len(KEYS)

keyless = []
refusing = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0})
refusing.produce(TOPIC, value=b"no key", on_delivery=lambda err, msg: keyless.append(err))
refusing.flush(20)
if not keyless or keyless[0] is None or keyless[0].code() != KafkaError.INVALID_RECORD:
    sys.exit("a keyless record to a compacted topic: expected INVALID_RECORD, got %r" % keyless)

# One batch of keyed records with keyless ones among them: the batch is refused, the answer names
# each keyless record (Produce v8's record_errors), and librdkafka fails those with
# INVALID_RECORD and the others with _INVALID_DIFFERENT_RECORD, as against Kafka.
mixed = {}
batching = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                     "linger.ms": 500})
for i in range(10):
    key = None if i % 5 == 0 else b"m%d" % i
    batching.produce(TOPIC, key=key, value=b"mixed %d" % i,
                     on_delivery=lambda err, msg, i=i: mixed.__setitem__(i, err))
batching.flush(20)
codes = {i: err.code() if err else None for i, err in mixed.items()}
expected = {i: KafkaError.INVALID_RECORD if i % 5 == 0 else KafkaError._INVALID_DIFFERENT_RECORD
            for i in range(10)}
if codes != expected:
    sys.exit("a batch with keyless records: expected %r, got %r" % (expected, codes))


def read_with_librdkafka():
    """(offset, key, value) of every record, from the log start to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compacted-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    records = []
    deadline = time.time() + 30
    while time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                break
            sys.exit("librdkafka: %s" % msg.error())
        records.append((msg.offset(), msg.key(), msg.value()))
    else:
        sys.exit("librdkafka never reached the end of the partition: %r" % records)
    consumer.close()
    return records


def read_with_kafka_python():
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=30000)
    partition = KafkaPythonPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    end = consumer.end_offsets([partition])[partition]
    records = []
    deadline = time.time() + 30
    while consumer.position(partition) < end and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=1000).values():
            records.extend((r.offset, r.key, r.value) for r in batch)
    if consumer.position(partition) < end:
        sys.exit("kafka-python stopped at %d before the end %d: %r"
                 % (consumer.position(partition), end, records))
    consumer.close()
    return records


# The cleaners run every 200 ms: wait until the leader's log is cleaned.
deadline = time.time() + 30
while True:
    records = read_with_librdkafka()
    if len(records) < written:
        break
    if time.time() > deadline:
        sys.exit("never cleaned: %d records of %d" % (len(records), written))
    time.sleep(0.5)

for name, records in (("librdkafka", records), ("kafka-python", read_with_kafka_python())):
    offsets = [o for o, _, _ in records]
    if offsets != sorted(set(offsets)):
        sys.exit("%s: offsets not rising: %r" % (name, offsets))
    latest = {}
    for _, key, value in records:
        latest[key] = value
    expected = {key: key + b"%d" % (ROUNDS - 1) for key in KEYS}
    if latest != expected:
        sys.exit("%s: latest values %r, expected %r" % (name, latest, expected))
    print("%s read %d records of %d written, each key's latest value last" % (
        name, len(records), written), flush=True)
print("ok")
