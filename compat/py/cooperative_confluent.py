"""confluent-kafka-python cooperative-sticky group driver for weir's
compatibility tests.

Run by compat/group_test.go with the system interpreter (/usr/bin/python3):

  cooperative_confluent.py BOOTSTRAP TOPIC GROUP

The topic must exist. One process runs a producer and two Consumer objects
of group GROUP (partition.assignment.strategy=cooperative-sticky), polled in
turn from this one thread, while the producer keeps producing:

  1. alone: the first consumer subscribes and reads until it owns every
     partition and has read what was produced before it joined;
  2. join: the second consumer subscribes; both are polled until the
     partitions are split between them (two cooperative rebalances) and
     each has read records since;
  3. leave: the second consumer closes (LeaveGroup); the first is polled
     until it owns every partition again;
  4. drain: production stops and the first consumer reads until it has
     every record that was acknowledged;
  5. close: the first consumer closes (its partitions are revoked).

Every consumed record is committed synchronously, by partition, as soon as
it is read, and only when the offset advances the last commit of that
partition. Output is JSON lines, one event per line, with "ev" one of
produced, consumed, assign, revoke, commit, phase; the Go driver checks
them. Any error exits non-zero with a message on stderr; every wait is
bounded.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

DEADLINE_S = 60
PER_ROUND = 3  # records produced per polling round while producing


def fail(msg):
    print("cooperative_confluent: " + msg, file=sys.stderr)
    sys.exit(1)


def emit(**ev):
    print(json.dumps(ev), flush=False)


class Member:
    """One group member: a Consumer plus what it owns and has read."""

    def __init__(self, name, bootstrap, topic, group, committed):
        self.name = name
        self.topic = topic
        self.owned = set()
        self.consumed = 0
        self.committed = committed  # shared: partition -> last committed offset
        self.closed = False
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        })

    def subscribe(self):
        self.consumer.subscribe([self.topic], on_assign=self.on_assign, on_revoke=self.on_revoke,
                                on_lost=self.on_lost)

    # With cooperative-sticky, librdkafka passes only the partitions that
    # are added or taken away; the library applies incremental_assign /
    # incremental_unassign after the callback returns.
    def on_assign(self, consumer, parts):
        ps = sorted(p.partition for p in parts)
        emit(ev="assign", consumer=self.name, partitions=ps)
        self.owned.update(ps)

    def on_revoke(self, consumer, parts):
        ps = sorted(p.partition for p in parts)
        emit(ev="revoke", consumer=self.name, partitions=ps)
        self.owned.difference_update(ps)

    def on_lost(self, consumer, parts):
        ps = sorted(p.partition for p in parts)
        emit(ev="lost", consumer=self.name, partitions=ps)
        self.owned.difference_update(ps)

    def poll(self, timeout):
        """Poll once, commit what was read; return the number of records."""
        msgs = self.consumer.consume(num_messages=100, timeout=timeout)
        nexts = {}
        n = 0
        for msg in msgs:
            if msg.error() is not None:
                fail("%s: consume: %s" % (self.name, msg.error()))
            emit(ev="consumed", consumer=self.name, key=msg.key().decode("utf-8"),
                 value=msg.value().decode("utf-8"), partition=msg.partition(), offset=msg.offset())
            nexts[msg.partition()] = msg.offset() + 1
            n += 1
        self.consumed += n
        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(nexts.items())
               if o > self.committed.get(p, -1)]
        if tps:
            res = self.consumer.commit(offsets=tps, asynchronous=False)
            for tp in res or []:
                if tp.error is not None:
                    fail("%s: commit %d: %s" % (self.name, tp.partition, tp.error))
            for tp in tps:
                self.committed[tp.partition] = tp.offset
                emit(ev="commit", consumer=self.name, partition=tp.partition, offset=tp.offset)
        return n

    def close(self):
        self.consumer.close()
        self.closed = True


def main():
    if len(sys.argv) != 4:
        fail("usage: cooperative_confluent.py BOOTSTRAP TOPIC GROUP")
    bootstrap, topic, group = sys.argv[1:]
    deadline = time.monotonic() + DEADLINE_S

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "partitioner": "murmur2_random",
        "linger.ms": 2,
    })
    produced = []  # acknowledged (partition, offset)
    errors = []
    seq = [0]

    def on_delivery(err, msg):
        if err is not None:
            errors.append("%s: %s" % (msg.key(), err))
            return
        produced.append((msg.partition(), msg.offset()))
        emit(ev="produced", key=msg.key().decode("utf-8"), value=msg.value().decode("utf-8"),
             partition=msg.partition(), offset=msg.offset())

    def produce(n):
        for _ in range(n):
            i = seq[0]
            seq[0] += 1
            producer.produce(topic, key=("key-%d" % i).encode(), value=("value-%d" % i).encode(),
                             on_delivery=on_delivery)
        producer.poll(0)
        if errors:
            fail("delivery failed: " + "; ".join(errors[:5]))

    def check_deadline(what):
        if time.monotonic() > deadline:
            fail("%s not done within %ds (c1 owns %s, c2 owns %s)" % (
                what, DEADLINE_S, sorted(c1.owned), sorted(c2.owned)))

    committed = {}
    c1 = Member("c1", bootstrap, topic, group, committed)
    c2 = Member("c2", bootstrap, topic, group, committed)
    all_parts = None

    try:
        md = c1.consumer.list_topics(topic, timeout=30)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            fail("topic %s not in metadata: %s" % (topic, t.error if t else "missing"))
        all_parts = set(t.partitions)

        produce(60)
        if producer.flush(30):
            fail("initial records not delivered")

        emit(ev="phase", name="alone")
        c1.subscribe()
        while not (c1.owned == all_parts and c1.consumed >= 60):
            check_deadline("alone")
            produce(PER_ROUND)
            c1.poll(0.1)

        emit(ev="phase", name="join")
        c2.subscribe()
        c1_read_at = c2_read_at = None
        while True:
            check_deadline("join")
            produce(PER_ROUND)
            c1.poll(0.05)
            c2.poll(0.05)
            split = (c1.owned and c2.owned and not (c1.owned & c2.owned)
                     and (c1.owned | c2.owned) == all_parts)
            if split and c2_read_at is None:
                c1_read_at, c2_read_at = c1.consumed, c2.consumed
            if not split:
                c1_read_at = c2_read_at = None
            elif c1.consumed > c1_read_at + 5 and c2.consumed > c2_read_at + 5:
                break

        emit(ev="phase", name="leave")
        c2.close()
        while c1.owned != all_parts:
            check_deadline("leave")
            produce(PER_ROUND)
            c1.poll(0.1)

        emit(ev="phase", name="drain")
        if producer.flush(30):
            fail("records not delivered")
        if errors:
            fail("delivery failed: " + "; ".join(errors[:5]))
        want = {}
        for p, o in produced:
            want[p] = max(want.get(p, 0), o + 1)
        while any(committed.get(p, 0) < o for p, o in want.items()):
            check_deadline("drain")
            c1.poll(0.1)
        emit(ev="phase", name="close")
        c1.close()
    except KafkaException as e:
        fail(str(e))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
