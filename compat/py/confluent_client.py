"""confluent-kafka-python (librdkafka) driver for weir's compatibility tests.

Run by compat/python_test.go with the system interpreter (/usr/bin/python3,
Debian package python3-confluent-kafka):

  confluent_client.py create  BOOTSTRAP TOPIC PARTITIONS
  confluent_client.py produce BOOTSTRAP TOPIC < records.jsonl
  confluent_client.py consume BOOTSTRAP TOPIC COUNT
  confluent_client.py consume-group BOOTSTRAP TOPIC COUNT GROUP

produce reads {"key","value"} JSON lines and prints one JSON line per
delivery report {"key","value","partition","offset"}; consume prints every
record it reads in the same shape and exits once COUNT were read: consume by
explicit assignment (no group), consume-group as a member of consumer group
GROUP (subscribe), committing the offsets synchronously before it exits. Any
error
exits non-zero with a message on stderr. Every wait is bounded.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, OFFSET_BEGINNING, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = 60


def fail(msg):
    print("confluent_client: " + msg, file=sys.stderr)
    sys.exit(1)


def create(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        request_timeout=30, operation_timeout=30)
    for name, f in futures.items():
        try:
            f.result(timeout=DEADLINE_S)
        except Exception as e:  # KafkaException carries the Kafka error
            fail("create topic %s: %s" % (name, e))


def produce(bootstrap, topic):
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        # Idempotence needs InitProducerId and sequence checks from the broker.
        "enable.idempotence": True,
        # librdkafka's default partitioner (consistent_random) is CRC32-based;
        # murmur2_random is the Java client's partitioner.
        "partitioner": "murmur2_random",
        "compression.type": "lz4",
        "linger.ms": 5,
        "message.max.bytes": 2000000,
    })
    errors = []
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append("%s: %s" % (msg.key(), err))
            return
        delivered.append({
            "key": msg.key().decode("utf-8"),
            "value": msg.value().decode("utf-8"),
            "partition": msg.partition(),
            "offset": msg.offset(),
        })

    for line in sys.stdin:
        if not line.strip():
            continue
        rec = json.loads(line)
        while True:
            try:
                producer.produce(topic, key=rec["key"].encode("utf-8"), value=rec["value"].encode("utf-8"),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(DEADLINE_S)
    if remaining:
        fail("%d records not delivered within %ds" % (remaining, DEADLINE_S))
    if errors:
        fail("delivery failed: " + "; ".join(errors[:5]))
    for d in delivered:
        print(json.dumps(d))


def consume(bootstrap, topic, count):
    # A group.id is required by the client, but partitions are assigned
    # explicitly: no group membership, no commits.
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "weir-compat-confluent",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "check.crcs": True,  # verify every batch's CRC-32C as stored by the broker
    })
    md = consumer.list_topics(topic, timeout=30)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        fail("topic %s not in metadata: %s" % (topic, t.error if t else "missing"))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(t.partitions)])
    got = 0
    deadline = time.monotonic() + DEADLINE_S
    while got < count:
        if time.monotonic() > deadline:
            fail("read %d of %d records within %ds" % (got, count, DEADLINE_S))
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == -191:  # _PARTITION_EOF (not enabled, kept for safety)
                continue
            fail("consume: %s" % msg.error())
        print(json.dumps({
            "key": msg.key().decode("utf-8"),
            "value": msg.value().decode("utf-8"),
            "partition": msg.partition(),
            "offset": msg.offset(),
        }))
        got += 1
    consumer.close()


def consume_group(bootstrap, topic, count, group):
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 30000,
    })
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + DEADLINE_S
    while got < count:
        if time.monotonic() > deadline:
            fail("group %s: read %d of %d records within %ds" % (group, got, count, DEADLINE_S))
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            fail("consume (group %s): %s" % (group, msg.error()))
        print(json.dumps({
            "key": msg.key().decode("utf-8"),
            "value": msg.value().decode("utf-8"),
            "partition": msg.partition(),
            "offset": msg.offset(),
        }))
        got += 1
    # Commit the positions (next offset to read) of every assigned partition.
    consumer.commit(asynchronous=False)
    consumer.close()


def main():
    if len(sys.argv) < 4:
        fail("usage: confluent_client.py create|produce|consume BOOTSTRAP TOPIC [N]")
    mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        if mode == "create":
            create(bootstrap, topic, int(sys.argv[4]))
        elif mode == "produce":
            produce(bootstrap, topic)
        elif mode == "consume":
            consume(bootstrap, topic, int(sys.argv[4]))
        elif mode == "consume-group":
            consume_group(bootstrap, topic, int(sys.argv[4]), sys.argv[5])
        else:
            fail("unknown mode " + mode)
    except KafkaException as e:
        fail("%s: %s" % (mode, e))


if __name__ == "__main__":
    main()
