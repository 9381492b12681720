"""confluent-kafka (librdkafka) producing through a leader failover on a real isr cluster.

Usage: confluent_failover.py BOOTSTRAP TOPIC SECONDS

Produces round-robin over every partition of TOPIC for SECONDS with acks=all and the idempotent
producer, recording each delivery report's (partition, offset, value). Meanwhile something else
(runtime/tests/client_failover.rs) kills and restarts brokers. Then it flushes, reads every
partition from the beginning up to its high watermark with a manually assigned Consumer (no
group membership), and checks that every delivered record is in the log at exactly the offset
it was delivered at and that no delivery failed.

stdout, flushed as it goes: "acked N" progress lines (N acknowledged so far, all partitions),
then one JSON line with the counts, the delivered offsets of each partition, and the values
found in the log more than once. Exits non-zero with a message on stderr if any check fails.
"""
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

bootstrap, topic, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])

delivered = {}  # (partition, offset) -> value
failed = []  # (partition, value, error)
fatal = []  # fatal client errors
produced = 0


def on_delivery(err, msg):
    if err is not None:
        failed.append((msg.partition(), msg.value().decode(), str(err)))
    else:
        delivered[(msg.partition(), msg.offset())] = msg.value().decode()


def on_error(err):
    # Connection failures to the killed broker land here; librdkafka retries them itself. A
    # fatal error (the idempotent producer gave up) is a failure.
    print("client error: %s" % err, file=sys.stderr, flush=True)
    if err.fatal():
        fatal.append(str(err))


def report():
    print("acked %d" % len(delivered), flush=True)


producer = Producer(
    {
        "bootstrap.servers": bootstrap,
        "error_cb": on_error,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        # Long enough to ride out an election and a broker restart: a record that times out
        # counts as a failed delivery.
        "message.timeout.ms": 60000,
    }
)
metadata = producer.list_topics(topic, timeout=20)
partitions = sorted(metadata.topics[topic].partitions)
if not partitions:
    sys.exit("topic %s has no partitions" % topic)

start = time.monotonic()
last_report = start
while time.monotonic() - start < seconds:
    partition = partitions[produced % len(partitions)]
    value = "p%d-%d" % (partition, produced)
    try:
        producer.produce(topic, value=value.encode(), partition=partition, on_delivery=on_delivery)
        produced += 1
    except BufferError:
        pass  # the local queue is full (a leader is away): serve callbacks and try again
    producer.poll(0.002)
    if time.monotonic() - last_report >= 0.1:
        report()
        last_report = time.monotonic()

remaining = producer.flush(90)
report()
problems = []
if remaining:
    problems.append("%d records still undelivered after flush" % remaining)
if failed:
    problems.append("%d deliveries failed, first: %s" % (len(failed), failed[:5]))
if len(delivered) + len(failed) != produced:
    problems.append(
        "%d produced but %d delivery reports" % (produced, len(delivered) + len(failed))
    )

# Read every partition back, from the beginning up to the high watermark.
log = {}  # (partition, offset) -> value
consumer = Consumer(
    {
        "bootstrap.servers": bootstrap,
        "error_cb": on_error,
        "group.id": "failover-check",
        "enable.auto.commit": False,
    }
)
for partition in partitions:
    tp = TopicPartition(topic, partition)
    low, high = consumer.get_watermark_offsets(tp, timeout=20)
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    deadline = time.monotonic() + 60
    next_offset = low
    while next_offset < high:
        if time.monotonic() > deadline:
            problems.append(
                "partition %d: read up to %d of high watermark %d within 60 s"
                % (partition, next_offset, high)
            )
            break
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().fatal():
                problems.append("partition %d: consume error %s" % (partition, msg.error()))
                break
            continue  # end of partition, or a transient error librdkafka retries
        log[(partition, msg.offset())] = msg.value().decode()
        next_offset = msg.offset() + 1
    consumer.unassign()
consumer.close()
if fatal:
    problems.append("fatal client errors: %s" % fatal)

lost = [
    (p, o, v, log.get((p, o)))
    for (p, o), v in sorted(delivered.items())
    if log.get((p, o)) != v
]
if lost:
    problems.append(
        "%d delivered records are not at their delivered offset, first (partition, offset, "
        "delivered, found): %s" % (len(lost), lost[:10])
    )
seen = {}
for (p, o), v in sorted(log.items()):
    seen.setdefault(v, []).append((p, o))
# A batch the old leader wrote but never acknowledged, retried to the new leader, must not be
# stored twice: the broker recognises the idempotent producer's retry.
duplicates = sorted((where, v) for v, where in seen.items() if len(where) > 1)
if duplicates:
    problems.append(
        "%d values stored more than once, first: %s" % (len(duplicates), duplicates[:5])
    )

offsets = {}
for p, o in sorted(delivered):
    offsets.setdefault(str(p), []).append(o)
print(
    json.dumps(
        {
            "produced": produced,
            "acked": len(delivered),
            "failed": len(failed),
            "read": len(log),
            "duplicates": [[v] + [list(w) for w in where] for where, v in duplicates],
            "offsets": offsets,
        }
    ),
    flush=True,
)
if problems:
    sys.exit("confluent_failover: " + "; ".join(problems))
