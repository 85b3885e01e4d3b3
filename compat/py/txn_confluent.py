"""confluent-kafka-python (librdkafka) transactional producer driver for weir's
compatibility tests (compat/txn_test.go), run with /usr/bin/python3:

  txn_confluent.py run BOOTSTRAP TOPIC PARTITIONS

The topic must exist. A transactional producer commits 10 records
("c0".."c9"), aborts 10 ("a0".."a9"), commits 10 more ("c10".."c19"); then a
read_committed consumer and a read_uncommitted consumer (explicit
assignment, from the beginning) read until the end offsets. It prints one
JSON line per consumer: {"isolation": ..., "values": [...]}. Any error exits
non-zero with a message on stderr. Every wait is bounded.
"""

import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING

DEADLINE_S = 60


def fail(msg):
    print("txn_confluent: " + msg, file=sys.stderr)
    sys.exit(1)


def produce_txns(bootstrap, topic):
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": "weir-compat-confluent-txn",
        "transaction.timeout.ms": 30000,
    })
    p.init_transactions(DEADLINE_S)
    for prefix, lo, hi, commit in (("c", 0, 10, True), ("a", 0, 10, False), ("c", 10, 20, True)):
        p.begin_transaction()
        for i in range(lo, hi):
            p.produce(topic, key=str(i).encode(), value=("%s%d" % (prefix, i)).encode())
        p.flush(DEADLINE_S)
        if commit:
            p.commit_transaction(DEADLINE_S)
        else:
            p.abort_transaction(DEADLINE_S)


def consume(bootstrap, topic, partitions, isolation):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "weir-compat-txn-" + isolation,
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
    c.assign(tps)
    eof = set()
    values = []
    deadline = time.time() + DEADLINE_S
    while len(eof) < partitions:
        if time.time() > deadline:
            fail("%s consumer: timed out, %d values, eof %s" % (isolation, len(values), sorted(eof)))
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                continue
            fail("%s consumer: %s" % (isolation, m.error()))
        eof.discard(m.partition())
        values.append(m.value().decode())
    c.close()
    return values


def main():
    if len(sys.argv) != 5 or sys.argv[1] != "run":
        fail("usage: txn_confluent.py run BOOTSTRAP TOPIC PARTITIONS")
    bootstrap, topic, partitions = sys.argv[2], sys.argv[3], int(sys.argv[4])
    produce_txns(bootstrap, topic)
    for iso in ("read_committed", "read_uncommitted"):
        print(json.dumps({"isolation": iso, "values": sorted(consume(bootstrap, topic, partitions, iso))}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
