"""confluent-kafka (librdkafka) as a Kafka user's tools drive a broker: automatic topic creation,
offsets by time, commit metadata, a group's offsets listed whole, the topic and group admin APIs,
configs that take effect, and transactions refused at once.

Usage: confluent_admin.py BOOTSTRAP TOPIC. Exits non-zero with a message on failure.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})


def check(cond, what, *details):
    if not cond:
        sys.exit("%s: %s" % (what, " ".join(str(d) for d in details)))


def wait(futures):
    return {k: f.result(timeout=30) for k, f in futures.items()}


# Automatic topic creation: a producer writes to a topic nobody created (Kafka's default
# auto.create.topics.enable), which gets the broker's num.partitions (1).
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
base = int(time.time() * 1000) - 100_000
for i in range(10):
    # Records ten seconds apart, in the past: offsets_for_times finds them by time.
    producer.produce(topic, value=b"r%d" % i, partition=0, timestamp=base + i * 10_000)
check(producer.flush(30) == 0, "undelivered records on an auto-created topic")
metadata = admin.list_topics(topic, timeout=10)
check(len(metadata.topics[topic].partitions) == 1, "auto-created partitions", metadata.topics)
print("auto-created", topic, flush=True)

# The controller named by every broker, and DescribeCluster agreeing.
cluster = admin.describe_cluster(request_timeout=10).result()
check(cluster.controller is not None and cluster.controller.id == metadata.controller_id,
      "DescribeCluster controller", cluster.controller, metadata.controller_id)

# Offsets by time, from a consumer and from the admin client.
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "timed",
                     "enable.auto.commit": False})
found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 35_000)], timeout=10)
check(found[0].error is None and found[0].offset == 4, "offsets_for_times", found)
late = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10**9)], timeout=10)
check(late[0].offset == -1, "offsets_for_times past the end", late)
tp = TopicPartition(topic, 0)
listed = admin.list_offsets({tp: OffsetSpec.max_timestamp()}).get(tp).result(timeout=10)
check(listed.offset == 9 and listed.timestamp == base + 90_000, "max timestamp", listed)
listed = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 50_000)}).get(tp).result(10)
check(listed.offset == 5, "for_timestamp", listed)
listed = admin.list_offsets({tp: OffsetSpec.earliest()}).get(tp).result(timeout=10)
check(listed.offset == 0, "earliest", listed)
listed = admin.list_offsets({tp: OffsetSpec.latest()}).get(tp).result(timeout=10)
check(listed.offset == 10, "latest", listed)
print("offsets by time ok", flush=True)

# Commit metadata comes back, and the whole group's offsets are listed without naming them.
consumer.commit(offsets=[TopicPartition(topic, 0, 7, "checkpoint-a")], asynchronous=False)
committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
check(committed[0].offset == 7 and committed[0].metadata == "checkpoint-a",
      "committed metadata", committed)
consumer.close()
from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: E402

whole = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("timed")])
offsets = whole["timed"].result(timeout=10).topic_partitions
check([(p.topic, p.partition, p.offset) for p in offsets] == [(topic, 0, 7)],
      "a group's offsets, listed whole", offsets)
groups = admin.list_consumer_groups(request_timeout=10).result()
check("timed" in [g.group_id for g in groups.valid], "list_consumer_groups", groups.valid)
described = admin.describe_consumer_groups(["timed"])["timed"].result(timeout=10)
check(str(described.state).endswith("EMPTY") and not described.members,
      "describe_consumer_groups", described.state, described.members)
wait(admin.delete_consumer_groups(["timed"], request_timeout=10))
gone = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("timed")])
check(not gone["timed"].result(timeout=10).topic_partitions, "offsets after delete")
print("groups ok", flush=True)

# Topic admin: create with configs, describe, change, grow, delete.
configured = topic + "-configured"
wait(admin.create_topics([NewTopic(configured, num_partitions=1, replication_factor=1,
                                   config={"retention.ms": "3600000"})]))
resource = ConfigResource("topic", configured)
configs = admin.describe_configs([resource])[resource].result(timeout=10)
check(configs["retention.ms"].value == "3600000"
      and configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
      "described retention.ms", configs["retention.ms"])
check(configs["max.message.bytes"].value == "1048588", "default max.message.bytes",
      configs["max.message.bytes"])
# A size limit that takes effect: 2000 bytes; a 5000-byte record is refused at once.
change = ConfigResource("topic", configured, incremental_configs=[
    ConfigEntry("max.message.bytes", "2000",
                incremental_operation=AlterConfigOpType.SET)])
wait(admin.incremental_alter_configs([change]))
configs = admin.describe_configs([resource])[resource].result(timeout=10)
check(configs["max.message.bytes"].value == "2000", "altered max.message.bytes")
# The controller sends every broker the change before it answers; the partition's leader may
# be another broker than the one that took the change: give it a moment to read it.
time.sleep(0.5)
errors = []
small = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 60000,
                  "retries": 1000})
started = time.time()
# One at a time: librdkafka would put both in one batch, which is too large as a whole.
for value in (b"x" * 5000, b"y" * 100):
    small.produce(configured, value=value, on_delivery=lambda err, msg: errors.append(err))
    small.flush(60)
names = sorted(e.name() if e else "OK" for e in errors)
check(names == ["MSG_SIZE_TOO_LARGE", "OK"], "records over and under the limit", names)
check(time.time() - started < 30, "MESSAGE_TOO_LARGE is not retried",
      "%.1f s" % (time.time() - started))
gzip = ConfigResource("topic", configured, incremental_configs=[
    ConfigEntry("compression.type", "gzip", incremental_operation=AlterConfigOpType.SET)])
wait(admin.incremental_alter_configs([gzip]))
bad = ConfigResource("topic", configured, incremental_configs=[
    ConfigEntry("compression.type", "brotli", incremental_operation=AlterConfigOpType.SET)])
try:
    wait(admin.incremental_alter_configs([bad]))
    sys.exit("an unknown codec was accepted")
except KafkaException as e:
    check(e.args[0].name() == "INVALID_CONFIG", "refused config", e)
compacted = ConfigResource("topic", configured, incremental_configs=[
    ConfigEntry("cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET)])
wait(admin.incremental_alter_configs([compacted]))
configs = admin.describe_configs([resource])[resource].result(timeout=10)
check(configs["cleanup.policy"].value == "compact,delete", "altered cleanup.policy",
      configs["cleanup.policy"].value)
check(configs["min.cleanable.dirty.ratio"].value == "0.5", "the cleaner's default ratio",
      configs["min.cleanable.dirty.ratio"].value)
# APPEND and SUBTRACT on a list config, from its current value; refused on any other config.
for op, value, expected in [(AlterConfigOpType.SUBTRACT, "compact", "delete"),
                            (AlterConfigOpType.APPEND, "compact", "delete,compact"),
                            (AlterConfigOpType.APPEND, "delete", "delete,compact")]:
    listed = ConfigResource("topic", configured, incremental_configs=[
        ConfigEntry("cleanup.policy", value, incremental_operation=op)])
    wait(admin.incremental_alter_configs([listed]))
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    check(configs["cleanup.policy"].value == expected, "cleanup.policy after %s %s" % (op, value),
          configs["cleanup.policy"].value)
appended = ConfigResource("topic", configured, incremental_configs=[
    ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)])
try:
    wait(admin.incremental_alter_configs([appended]))
    sys.exit("APPEND to retention.ms, not a list, was accepted")
except KafkaException as e:
    check(e.args[0].name() == "INVALID_CONFIG", "APPEND to a config not a list", e)
wait(admin.create_partitions([NewPartitions(configured, 3)]))
check(len(admin.list_topics(configured, timeout=10).topics[configured].partitions) == 3,
      "partitions after create_partitions")
wait(admin.delete_topics([configured], operation_timeout=10))
# The broker that answered the deletion has the change; another (list_topics asks any) may
# apply it a moment later, as in Kafka, where metadata reaches brokers asynchronously.
deadline = time.time() + 10
while True:
    remaining = admin.list_topics(timeout=10).topics
    if configured not in remaining or time.time() > deadline:
        break
    time.sleep(0.2)
check(configured not in remaining, "topic after delete_topics", list(remaining))
print("topic admin ok", flush=True)

# Transactions are refused at once, with a clear, fatal error.
started = time.time()
try:
    Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx"}).init_transactions(30)
    sys.exit("init_transactions succeeded")
except KafkaException as e:
    err = e.args[0]
    check(err.fatal() and not err.retriable(), "transactional error kind", err)
    check("transactions are not supported" in err.str(), "transactional error text", err)
check(time.time() - started < 5, "init_transactions failed fast",
      "%.1f s" % (time.time() - started))
print("confluent-kafka admin ok", flush=True)
