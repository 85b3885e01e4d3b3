"""kafka-python driver for weir's compatibility tests.

Run by compat/python_test.go with the system interpreter (/usr/bin/python3,
Debian package python3-kafka):

  kafkapython_client.py create  BOOTSTRAP TOPIC PARTITIONS
  kafkapython_client.py produce BOOTSTRAP TOPIC < records.jsonl
  kafkapython_client.py consume BOOTSTRAP TOPIC COUNT
  kafkapython_client.py consume-group BOOTSTRAP TOPIC COUNT GROUP

produce reads {"key","value"} JSON lines and prints one JSON line per
acknowledged record {"key","value","partition","offset"}; consume prints
every record it reads in the same shape and exits once COUNT were read:
consume by explicit assignment (no group), consume-group as a member of
consumer group GROUP (subscribe), committing synchronously before it exits.
kafka-python finds the broker's protocol versions by probing
(api_version is not pinned). Any error exits non-zero with a message on
stderr. Every wait is bounded.
"""

import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

DEADLINE_S = 60


def fail(msg):
    print("kafkapython_client: " + msg, file=sys.stderr)
    sys.exit(1)


def create(bootstrap, topic, partitions):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="weir-compat", request_timeout_ms=30000)
    resp = admin.create_topics([NewTopic(name=topic, num_partitions=partitions, replication_factor=1)])
    for name, code, *rest in resp.topic_errors:
        if code != 0:
            fail("create topic %s: error code %d %s" % (name, code, rest))
    admin.close()


def produce(bootstrap, topic):
    # The default partitioner is the Java client's (murmur2).
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                             compression_type="gzip", max_request_size=2000000,
                             request_timeout_ms=30000)
    pending = []
    for line in sys.stdin:
        if not line.strip():
            continue
        rec = json.loads(line)
        fut = producer.send(topic, key=rec["key"].encode("utf-8"), value=rec["value"].encode("utf-8"))
        pending.append((rec, fut))
    producer.flush(timeout=DEADLINE_S)
    out = []
    for rec, fut in pending:
        md = fut.get(timeout=DEADLINE_S)  # raises the delivery error, if any
        out.append({"key": rec["key"], "value": rec["value"], "partition": md.partition, "offset": md.offset})
    producer.close(timeout=10)
    for o in out:
        print(json.dumps(o))


def consume(bootstrap, topic, count):
    # No group: partitions are assigned explicitly, nothing is committed.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=4 << 20)
    deadline = time.monotonic() + DEADLINE_S
    parts = None
    while not parts:
        if time.monotonic() > deadline:
            fail("no partitions for topic %s in metadata" % topic)
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            time.sleep(0.1)
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got = 0
    while got < count:
        if time.monotonic() > deadline:
            fail("read %d of %d records within %ds" % (got, count, DEADLINE_S))
        batches = consumer.poll(timeout_ms=500)
        for tp, msgs in sorted(batches.items()):
            for msg in msgs:
                print(json.dumps({
                    "key": msg.key.decode("utf-8"),
                    "value": msg.value.decode("utf-8"),
                    "partition": msg.partition,
                    "offset": msg.offset,
                }))
                got += 1
    consumer.close()


def consume_group(bootstrap, topic, count, group):
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=4 << 20, session_timeout_ms=30000)
    deadline = time.monotonic() + DEADLINE_S
    got = 0
    while got < count:
        if time.monotonic() > deadline:
            fail("group %s: read %d of %d records within %ds" % (group, got, count, DEADLINE_S))
        batches = consumer.poll(timeout_ms=500)
        for tp, msgs in sorted(batches.items()):
            for msg in msgs:
                print(json.dumps({
                    "key": msg.key.decode("utf-8"),
                    "value": msg.value.decode("utf-8"),
                    "partition": msg.partition,
                    "offset": msg.offset,
                }))
                got += 1
    consumer.commit()  # synchronous: the positions of every assigned partition
    consumer.close(autocommit=False)


def main():
    if len(sys.argv) < 4:
        fail("usage: kafkapython_client.py create|produce|consume BOOTSTRAP TOPIC [N]")
    mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3]
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


if __name__ == "__main__":
    main()
