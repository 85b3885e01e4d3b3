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

Every consumed record is committed, by partition, as soon as it is read,
and only when the offset advances the last commit of that partition; its
"commit" event is emitted when the coordinator has accepted it. These
commits are asynchronous: both members live in this one thread, and a
synchronous commit can wait behind the member's own JoinGroup on the
coordinator connection (a broker answers a connection's requests in order,
as Kafka does) while that JoinGroup waits for the other member, whose
rebalance callback only this blocked thread can run: a deadlock until the
request times out. A commit refused with REBALANCE_IN_PROGRESS (as Kafka
does while the group completes a rebalance) stays pending and is sent again.
Before partitions are revoked, what was read from them is committed
synchronously (no JoinGroup of the member is in flight then).

Records are read with poll(), one at a time, not with consume(): with
librdkafka before 2.1.0 (Debian ships 2.0.2), the batch API
(rd_kafka_consume_batch_queue) intermittently skips an offset when a
partition is paused and resumed, which the cooperative assignor does to
every assigned partition at each incremental assignment: a record fetched
just before the assignment is dropped from the queue while the consumer's
position moves past it (librdkafka CHANGELOG v2.1.0, "Fixed
rd_kafka_consume_batch() and rd_kafka_consume_batch_queue() intermittently
skipping offsets when pause or resume was being used for a partition").
The record is then never delivered, and the drain phase waits for it until
the deadline. Output is JSON lines, one event per line, with "ev" one of
produced, consumed, assign, revoke, commit, phase; the Go driver checks
them. Any error exits non-zero with a message on stderr; every wait is
bounded.
"""

import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

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
        self.pending = {}  # partition -> offset read but not committed yet
        self.inflight = {}  # partition -> offset of the last asynchronous commit sent
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
            "on_commit": self.on_commit,
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
        # What was read from these partitions is committed before they go
        # (the group is not completing a rebalance while a member runs its
        # revoke callback, so the commit is not refused for that).
        if not self.commit_sync(ps):
            fail("%s: commit before revoking %s refused: rebalance in progress" % (self.name, ps))
        emit(ev="revoke", consumer=self.name, partitions=ps)
        self.owned.difference_update(ps)

    def on_lost(self, consumer, parts):
        ps = sorted(p.partition for p in parts)
        emit(ev="lost", consumer=self.name, partitions=ps)
        self.owned.difference_update(ps)

    def poll(self, timeout):
        """Poll for up to 100 records, commit what was read; return the count."""
        n = 0
        while n < 100:
            msg = self.consumer.poll(timeout if n == 0 else 0)
            if msg is None:
                break
            if msg.error() is not None:
                fail("%s: consume: %s" % (self.name, msg.error()))
            emit(ev="consumed", consumer=self.name, key=msg.key().decode("utf-8"),
                 value=msg.value().decode("utf-8"), partition=msg.partition(), offset=msg.offset())
            self.pending[msg.partition()] = msg.offset() + 1
            n += 1
        self.consumed += n
        self.commit_async()
        return n

    def commit_async(self):
        """Send the pending offsets that no commit in flight covers."""
        tps = [TopicPartition(self.topic, p, o) for p, o in sorted(self.pending.items())
               if o > max(self.committed.get(p, -1), self.inflight.get(p, -1))]
        if tps:
            self.consumer.commit(offsets=tps, asynchronous=True)
            for tp in tps:
                self.inflight[tp.partition] = tp.offset

    def on_commit(self, err, parts):
        """Result of a commit, served by poll. Only the latest asynchronous
        commit of a partition counts (a synchronous one is handled by
        commit_sync; an older one is superseded)."""
        for tp in parts:
            p = tp.partition
            if self.inflight.get(p) != tp.offset:
                continue
            del self.inflight[p]
            e = tp.error if tp.error is not None else err
            if e is not None:
                if e.code() == KafkaError.REBALANCE_IN_PROGRESS:
                    continue  # still pending: sent again by the next poll
                fail("%s: commit %d: %s" % (self.name, p, e))
            self.accepted(p, tp.offset)

    def accepted(self, p, offset):
        if offset > self.committed.get(p, -1):
            self.committed[p] = offset
            emit(ev="commit", consumer=self.name, partition=p, offset=offset)
        if self.pending.get(p, -1) <= offset:
            self.pending.pop(p, None)

    def commit_sync(self, partitions):
        """Commit the pending offsets of partitions synchronously. Returns
        False if the coordinator refused with REBALANCE_IN_PROGRESS; any
        other error fails the run."""
        tps = [TopicPartition(self.topic, p, self.pending[p]) for p in partitions
               if p in self.pending and self.pending[p] > self.committed.get(p, -1)]
        if not tps:
            return True
        try:
            res = self.consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            if e.args and e.args[0].code() == KafkaError.REBALANCE_IN_PROGRESS:
                return False
            raise
        for tp in res or []:
            if tp.error is not None:
                if tp.error.code() == KafkaError.REBALANCE_IN_PROGRESS:
                    return False
                fail("%s: commit %d: %s" % (self.name, tp.partition, tp.error))
        for tp in tps:
            self.inflight.pop(tp.partition, None)
            self.accepted(tp.partition, tp.offset)
        return True

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
            if time.monotonic() > deadline:
                try:
                    pos = {tp.partition: tp.offset for tp in c1.consumer.position(c1.consumer.assignment())}
                except KafkaException as e:
                    pos = str(e)
                fail("drain not done within %ds: c1 owns %s; per partition: acknowledged end %s, "
                     "committed %s, c1 position %s" % (DEADLINE_S, sorted(c1.owned), sorted(want.items()),
                                                       sorted(committed.items()), pos))
            c1.poll(0.1)
        emit(ev="phase", name="close")
        c1.close()
    except KafkaException as e:
        fail(str(e))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
