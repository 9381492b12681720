"""A real client against a secured isr cluster, configured from a librdkafka-format
properties file (what `isr cluster --security` writes): bootstrap.servers, security.protocol,
sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location,
ssl.key.location.

Usage: secure_client.py CLIENT PROPERTIES ACTION TOPIC
  CLIENT: confluent | kafka-python
  ACTION: roundtrip  produce 10 records (acks=all) and read them back from the beginning
          produce    produce one record
          group      consume one record in the consumer group secure-group-CLIENT (subscribing
                     to TOPIC), and leave the group
Prints "OK" and exits 0 on success; on a refusal prints "ERROR NAME: message" (NAME is the
client's name for the error) and exits 3.
"""
import os
import logging
import sys
import uuid

import properties

client, path, action, topic = sys.argv[1:5]
# The clients log why a connection failed (a refused login, a bad certificate) at ERROR.
logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
COUNT = 10
GROUP = "secure-group-" + client

props = properties.read(path)


def refused(name, message):
    print("ERROR %s: %s" % (name, message), flush=True)
    sys.exit(3)


def confluent():
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    failures = []

    def on_error(err):
        # Authentication and transport failures arrive here; librdkafka would retry them until
        # its timeouts, but the first one says it all.
        failures.append(err)

    common = dict(props, **{"error_cb": on_error})
    if action == "group":
        consumer = Consumer(dict(common, **{"group.id": GROUP, "auto.offset.reset": "earliest"}))
        consumer.subscribe([topic])
        for _ in range(150):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error():
                refused(msg.error().name(), msg.error().str())
            if msg is not None:
                # Leave the group, or the next member would wait out this one's session.
                consumer.close()
                return
        raise SystemExit("no record and no error within 15 s")
    producer = Producer(dict(common, **{"acks": "all", "message.timeout.ms": 15000}))
    delivered = []

    def on_delivery(err, msg):
        delivered.append((err, msg))

    count = COUNT if action == "roundtrip" else 1
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, on_delivery=on_delivery)
        producer.poll(0)
    while len(delivered) < count:
        producer.poll(0.1)
        if failures and failures[0].fatal() is False and failures[0].name() in (
            "_AUTHENTICATION",
            "_TRANSPORT",
            "_SSL",
            "_ALL_BROKERS_DOWN",
        ):
            refused(failures[0].name(), failures[0].str())
    errors = [err for err, _ in delivered if err is not None]
    if errors:
        refused(errors[0].name(), errors[0].str())
    if action == "produce":
        return
    consumer = Consumer(
        dict(common, **{"group.id": "secure-%s" % uuid.uuid4(), "auto.offset.reset": "earliest"})
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []
    while len(seen) < COUNT:
        msg = consumer.poll(15)
        if msg is None:
            break
        if msg.error():
            raise KafkaException(msg.error())
        seen.append(msg.value())
    consumer.close()
    assert seen == [b"v%d" % i for i in range(COUNT)], seen


def kafka_python():
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError

    names = {
        "bootstrap.servers": "bootstrap_servers",
        "security.protocol": "security_protocol",
        "sasl.mechanism": "sasl_mechanism",
        "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password",
        "ssl.ca.location": "ssl_cafile",
        "ssl.certificate.location": "ssl_certfile",
        "ssl.key.location": "ssl_keyfile",
    }
    config = {names[k]: v for k, v in props.items() if k in names}
    config["bootstrap_servers"] = config["bootstrap_servers"].split(",")
    if "bootstrap_timeout_ms" in KafkaProducer.DEFAULT_CONFIG:
        # A broker that closes every connection (a plaintext client on a TLS listener) is
        # retried until this runs out (30 s by default): a refusal should not take that long.
        # A caller whose logins the broker may throttle gives more (ISR_BOOTSTRAP_TIMEOUT_MS).
        config["bootstrap_timeout_ms"] = int(os.environ.get("ISR_BOOTSTRAP_TIMEOUT_MS", "5000"))
    if action == "group":
        try:
            consumer = KafkaConsumer(
                topic, group_id=GROUP, auto_offset_reset="earliest",
                consumer_timeout_ms=15000, **config
            )
            for _ in consumer:
                consumer.close()
                return
        except KafkaError as e:
            refused(type(e).__name__, str(e))
        raise SystemExit("no record and no error within 15 s")
    try:
        producer = KafkaProducer(acks="all", **config)
        count = COUNT if action == "roundtrip" else 1
        futures = [producer.send(topic, value=b"v%d" % i, partition=0) for i in range(count)]
        for f in futures:
            f.get(timeout=15)
        producer.close()
    except KafkaError as e:
        refused(type(e).__name__, str(e))
    if action == "produce":
        return
    consumer = KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=15000, **config)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    seen = []
    for record in consumer:
        seen.append(record.value)
        if len(seen) == COUNT:
            break
    consumer.close()
    assert seen == [b"v%d" % i for i in range(COUNT)], seen


{"confluent": confluent, "kafka-python": kafka_python}[client]()
print("OK", flush=True)
