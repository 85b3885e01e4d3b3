"""TLS/SASL driver for weir's security compatibility tests, for
confluent-kafka-python (librdkafka) and kafka-python.

Run by compat/security_test.go with the system interpreter:

  secure_client.py LIB produce BOOTSTRAP TOPIC < records.jsonl
  secure_client.py LIB consume BOOTSTRAP TOPIC COUNT
  secure_client.py LIB metadata BOOTSTRAP

LIB is "confluent" or "kafkapython". The security settings come from the
environment, so that no secret is on a command line:

  WEIR_SEC_PROTOCOL   SSL, SASL_SSL, SASL_PLAINTEXT
  WEIR_SEC_MECHANISM  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (SASL only)
  WEIR_SEC_USER, WEIR_SEC_PASSWORD
  WEIR_SEC_CA         PEM CA file the broker's certificate is checked against
  WEIR_SEC_CERT, WEIR_SEC_KEY  client certificate and key (mTLS), optional

produce reads {"key","value"} JSON lines and prints one JSON line per
acknowledged record {"key","value","partition","offset"}; consume assigns
every partition from the beginning and prints each record until COUNT were
read; metadata prints the topic names. Any error exits 1 with the error on
stderr. Every wait is bounded.
"""

import json
import os
import sys
import time

DEADLINE_S = 60


def fail(msg):
    print("secure_client: " + msg, file=sys.stderr)
    sys.exit(1)


def env(name):
    return os.environ.get(name, "")


def confluent_conf(bootstrap):
    conf = {"bootstrap.servers": bootstrap, "security.protocol": env("WEIR_SEC_PROTOCOL")}
    if env("WEIR_SEC_CA"):
        conf["ssl.ca.location"] = env("WEIR_SEC_CA")
    if env("WEIR_SEC_CERT"):
        conf["ssl.certificate.location"] = env("WEIR_SEC_CERT")
        conf["ssl.key.location"] = env("WEIR_SEC_KEY")
    if env("WEIR_SEC_MECHANISM"):
        conf["sasl.mechanisms"] = env("WEIR_SEC_MECHANISM")
        conf["sasl.username"] = env("WEIR_SEC_USER")
        conf["sasl.password"] = env("WEIR_SEC_PASSWORD")
    return conf


def kafkapython_conf(bootstrap):
    conf = {"bootstrap_servers": bootstrap, "security_protocol": env("WEIR_SEC_PROTOCOL")}
    if env("WEIR_SEC_CA"):
        conf["ssl_cafile"] = env("WEIR_SEC_CA")
    if env("WEIR_SEC_CERT"):
        conf["ssl_certfile"] = env("WEIR_SEC_CERT")
        conf["ssl_keyfile"] = env("WEIR_SEC_KEY")
    if env("WEIR_SEC_MECHANISM"):
        conf["sasl_mechanism"] = env("WEIR_SEC_MECHANISM")
        conf["sasl_plain_username"] = env("WEIR_SEC_USER")
        conf["sasl_plain_password"] = env("WEIR_SEC_PASSWORD")
    return conf


def records_in():
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def out(key, value, partition, offset):
    print(json.dumps({"key": key, "value": value, "partition": partition, "offset": offset}))


def confluent(mode, args):
    from confluent_kafka import Consumer, KafkaException, OFFSET_BEGINNING, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    bootstrap = args[0]
    try:
        if mode == "metadata":
            conf = confluent_conf(bootstrap)
            errors = []
            conf["error_cb"] = lambda e: errors.append(str(e))
            md = AdminClient(conf).list_topics(timeout=15)
            if errors:
                fail("metadata: " + "; ".join(errors))
            for name in sorted(md.topics):
                print(name)
        elif mode == "produce":
            conf = confluent_conf(bootstrap)
            conf.update({"acks": "all", "partitioner": "murmur2_random", "linger.ms": 5, "message.max.bytes": 2000000})
            p = Producer(conf)
            errors, acked = [], []

            def on_delivery(err, msg):
                if err is not None:
                    errors.append(str(err))
                else:
                    acked.append((msg.key().decode(), msg.value().decode(), msg.partition(), msg.offset()))
            for rec in records_in():
                p.produce(args[1], key=rec["key"].encode(), value=rec["value"].encode(), on_delivery=on_delivery)
                p.poll(0)
            if p.flush(DEADLINE_S):
                fail("records not delivered within %ds (%s)" % (DEADLINE_S, "; ".join(errors[:3])))
            if errors:
                fail("delivery: " + "; ".join(errors[:3]))
            for a in acked:
                out(*a)
        elif mode == "consume":
            topic, count = args[1], int(args[2])
            conf = confluent_conf(bootstrap)
            conf.update({"group.id": "weir-compat-secure", "enable.auto.commit": False, "check.crcs": True})
            c = Consumer(conf)
            md = c.list_topics(topic, timeout=30)
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(md.topics[topic].partitions)])
            got, deadline = 0, time.monotonic() + DEADLINE_S
            while got < count:
                if time.monotonic() > deadline:
                    fail("read %d of %d records" % (got, count))
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error() is not None:
                    fail("consume: %s" % m.error())
                out(m.key().decode(), m.value().decode(), m.partition(), m.offset())
                got += 1
            c.close()
        else:
            fail("unknown mode " + mode)
    except KafkaException as e:
        fail("%s: %s" % (mode, e))


def kafkapython(mode, args):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError
    bootstrap = args[0]
    try:
        if mode == "metadata":
            c = KafkaConsumer(request_timeout_ms=15000, api_version_auto_timeout_ms=15000, **kafkapython_conf(bootstrap))
            for name in sorted(c.topics()):
                print(name)
            c.close()
        elif mode == "produce":
            p = KafkaProducer(acks="all", linger_ms=5, max_request_size=2000000, **kafkapython_conf(bootstrap))
            futures = [(rec, p.send(args[1], key=rec["key"].encode(), value=rec["value"].encode())) for rec in records_in()]
            p.flush(DEADLINE_S)
            for rec, f in futures:
                md = f.get(timeout=DEADLINE_S)
                out(rec["key"], rec["value"], md.partition, md.offset)
            p.close()
        elif mode == "consume":
            topic, count = args[1], int(args[2])
            c = KafkaConsumer(enable_auto_commit=False, fetch_max_bytes=4 << 20, max_partition_fetch_bytes=4 << 20,
                              **kafkapython_conf(bootstrap))
            parts = None
            deadline = time.monotonic() + DEADLINE_S
            while not parts:
                if time.monotonic() > deadline:
                    fail("no partitions for " + topic)
                parts = c.partitions_for_topic(topic)
                if not parts:
                    time.sleep(0.2)
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            got = 0
            while got < count:
                if time.monotonic() > deadline:
                    fail("read %d of %d records" % (got, count))
                for _, msgs in c.poll(timeout_ms=500).items():
                    for m in msgs:
                        out(m.key.decode(), m.value.decode(), m.partition, m.offset)
                        got += 1
            c.close()
        else:
            fail("unknown mode " + mode)
    except KafkaError as e:
        fail("%s: %r" % (mode, e))


def main():
    if len(sys.argv) < 4:
        fail("usage: secure_client.py confluent|kafkapython produce|consume|metadata BOOTSTRAP [TOPIC [COUNT]]")
    lib, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if lib == "confluent":
        confluent(mode, args)
    elif lib == "kafkapython":
        kafkapython(mode, args)
    else:
        fail("unknown client library " + lib)


if __name__ == "__main__":
    main()
