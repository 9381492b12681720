"""kafka-python as a Kafka user's tools drive a broker: automatic topic creation, offsets by time,
commit metadata, a group's offsets listed whole, the topic and group admin APIs, configs, and
transactions refused at once. (kafka-python checks topic names itself; kcat.rs checks that the
broker refuses illegal ones.)

Usage: kafka_python_admin.py BOOTSTRAP TOPIC. Exits non-zero with a message on failure.
"""
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.admin._partitions import NewPartitions
from kafka.admin._topics import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

bootstrap, topic = sys.argv[1], sys.argv[2]


def check(cond, what, *details):
    if not cond:
        sys.exit("%s: %s" % (what, " ".join(str(d) for d in details)))


# Automatic topic creation: kafka-python's producer asks Metadata to create the topic.
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
base = int(time.time() * 1000) - 100_000
for i in range(10):
    producer.send(topic, value=b"r%d" % i, partition=0, timestamp_ms=base + i * 10_000).get(30)
producer.flush()
print("auto-created", topic, flush=True)

# Offsets by time.
tp = TopicPartition(topic, 0)
consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="timed",
                         enable_auto_commit=False)
found = consumer.offsets_for_times({tp: base + 35_000})
check(found[tp] is not None and found[tp].offset == 4
      and found[tp].timestamp == base + 40_000, "offsets_for_times", found)
late = consumer.offsets_for_times({tp: base + 10**9})
check(late[tp] is None, "offsets_for_times past the end", late)
check(consumer.beginning_offsets([tp])[tp] == 0, "beginning_offsets")
check(consumer.end_offsets([tp])[tp] == 10, "end_offsets")
print("offsets by time ok", flush=True)

# Commit metadata comes back; the group's offsets are listed without naming them.
consumer.commit({tp: OffsetAndMetadata(7, "checkpoint-b", -1)})
committed = consumer.committed(tp, metadata=True)
check(committed.offset == 7 and committed.metadata == "checkpoint-b", "committed", committed)
consumer.close()
admin = KafkaAdminClient(bootstrap_servers=bootstrap)
whole = admin.list_group_offsets({"timed": None})["timed"]
check({p: o.offset for p, o in whole.items()} == {tp: 7}, "a group's offsets, listed whole",
      whole)
listed = [g["group_id"] if isinstance(g, dict) else g[0] for g in admin.list_groups()]
check("timed" in listed, "list_groups", listed)
described = admin.describe_groups(["timed"])
check(described, "describe_groups", described)
admin.delete_group_offsets("timed", [tp])
check(not admin.list_group_offsets({"timed": None})["timed"], "after delete_group_offsets")
deleted = admin.delete_groups(["timed"])
check(len(deleted) == 1, "delete_groups", deleted)
print("groups ok", flush=True)

# The controller every broker names, and DescribeCluster.
cluster = admin.describe_cluster()
check(cluster["controller_id"] >= 0 and cluster["brokers"], "describe_cluster", cluster)

# Topic admin: create with configs, describe, alter, grow, delete.
configured = topic + "-configured"
admin.create_topics([NewTopic(configured, 1, 1, topic_configs={"retention.ms": "3600000"})])
resource = ConfigResource(ConfigResourceType.TOPIC, configured)
described = admin.describe_configs([resource], config_filter="all")
text = str(described)
check("retention.ms" in text and "3600000" in text and "max.message.bytes" in text,
      "describe_configs", text[:2000])
admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, configured,
                                    configs={"retention.ms": "7200000"})])
check("7200000" in str(admin.describe_configs([resource], config_filter="all")),
      "retention.ms after alter_configs")
admin.create_partitions({configured: NewPartitions(3)})
admin.delete_topics([configured])
check(configured not in admin.list_topics(), "topic after delete_topics")
print("topic admin ok", flush=True)

producer.close()

# Transactions are refused at once.
started = time.time()
try:
    txn = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx")
    txn.init_transactions()
    sys.exit("init_transactions succeeded")
except KafkaError as e:
    check("TransactionalIdAuthorizationFailed" in type(e).__name__, "transactional error", e)
check(time.time() - started < 10, "init_transactions failed fast",
      "%.1f s" % (time.time() - started))
print("kafka-python admin ok", flush=True)
