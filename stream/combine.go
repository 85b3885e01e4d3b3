package stream

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// CombineRounds merges the records of one processing round that share a key
// into one record, folding their values with fn(earlier, later) in the order
// the task handled them, and passes the merged records on at the end of the
// round (a combiner, as MapReduce's, or a pre-aggregation ahead of a
// repartition): a repartition after it carries one record per key and round
// instead of one per input record. It keeps no state: nothing is held from
// one round to the next.
//
// The merged record of a key has the merged value, the largest timestamp of
// the records merged, and the headers and origin of the last of them. The
// merged records of a round go downstream in the order of each key's first
// record in the round, at the round's end, before the time-driven operators
// after this one act on the round's watermark and before the round's
// watermark markers are written to a repartition topic: a window downstream
// (in the task, or across a repartition) judges a merged record's lateness
// as it would have judged the records merged, as long as all of them fall in
// the same windows as the largest timestamp — key by the window (for
// instance the window's start) as well to make sure of it.
//
// Guarantees: the merged records are outputs of the round the records were
// handled in (under ExactlyOnce inside its transaction; an aborted round's
// merge is dropped with it), so an input offset is never committed before
// the merged record covering it is written. fn runs while its record is
// processed: an error from fn (or a panic) fails that record (retried, then
// dead-lettered as any operator's), and a record that fails, here or in
// another operator, leaves nothing in the merge.
// A failure downstream of the merge, at the round's end, sends one
// dead-letter record naming the origin (topic, partition, offset) of the
// last record merged, without key or value, and the round goes on.
//
// A tombstone (Record.Tombstone, from a table's ToStream) is ignored, as
// stream aggregations ignore it. The key is not changed: a keyed operator
// after it repartitions only if one before it changed the key.
func CombineRounds[K comparable, V any](s Stream[K, V], fn func(a, b V) (V, error), opts ...OpOpt) Stream[K, V] {
	b := s.b
	if !s.valid() {
		return invalid[K, V](b)
	}
	if fn == nil {
		b.errorf("combine rounds: nil merge function")
		return invalid[K, V](b)
	}
	var n *node
	n = s.link("combine-rounds", func(t *task, children []any) any {
		c := &roundCombiner[K, V]{t: t, n: n, fn: fn, index: map[K]int{}}
		if len(children) > 0 {
			c.next = fanout[K, V](children)
		}
		t.addTimed(c)
		t.addFlusher(c)
		return func(r Record[K, V]) error {
			if err := c.add(r); err != nil {
				return failedIn(n, err)
			}
			return nil
		}
	})
	if n == nil {
		return invalid[K, V](b)
	}
	for _, o := range opts {
		o.applyOp(n)
	}
	b.validateOp(n)
	return Stream[K, V]{b: b, n: n, sources: s.sources, keyChanged: s.keyChanged}
}

// roundCombiner is one task's instance of CombineRounds.
//
// Invariants: merged holds the records merged since the last flush, of
// records whose processing succeeded (commitStaged), in the order of each
// key's first one; index maps a key to its slot in merged. staged holds the
// merges of the record being processed, applied only if it succeeds. The
// task flushes the combiner at the end of every round (advance), before any
// commit (a table flush: flushTablesForCommit) and drops it when a round
// aborts (drop), so merged is empty between rounds.
type roundCombiner[K comparable, V any] struct {
	t      *task
	n      *node
	fn     func(a, b V) (V, error)
	next   func(Record[K, V]) error // nil: nothing downstream
	merged []Record[K, V]
	index  map[K]int
	staged []Record[K, V]
}

// add merges r into the key's record of the round, staged until r's
// processing succeeds.
func (c *roundCombiner[K, V]) add(r Record[K, V]) error {
	if r.Tombstone {
		return nil
	}
	prev, found := c.current(r.Key)
	out := Record[K, V]{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin}
	if found {
		v, err := c.fn(prev.Value, r.Value)
		if err != nil {
			return err
		}
		out.Value = v
		if prev.Timestamp.After(out.Timestamp) {
			out.Timestamp = prev.Timestamp
		}
	}
	for i := range c.staged {
		if c.staged[i].Key == r.Key {
			c.staged[i] = out
			return nil
		}
	}
	c.staged = append(c.staged, out)
	return nil
}

// current returns the key's merged record as the record being processed
// sees it: its own earlier merges first, then the round's.
func (c *roundCombiner[K, V]) current(k K) (Record[K, V], bool) {
	for i := len(c.staged) - 1; i >= 0; i-- {
		if c.staged[i].Key == k {
			return c.staged[i], true
		}
	}
	if i, ok := c.index[k]; ok {
		return c.merged[i], true
	}
	return Record[K, V]{}, false
}

func (c *roundCombiner[K, V]) nodeID() int       { return c.n.id }
func (c *roundCombiner[K, V]) storeName() string { return "" }
func (c *roundCombiner[K, V]) pending() int64    { return int64(len(c.merged)) }

func (c *roundCombiner[K, V]) commitStaged() {
	for _, r := range c.staged {
		if i, ok := c.index[r.Key]; ok {
			c.merged[i] = r
			continue
		}
		c.index[r.Key] = len(c.merged)
		c.merged = append(c.merged, r)
	}
	c.dropStaged()
}

func (c *roundCombiner[K, V]) dropStaged() {
	clear(c.staged)
	c.staged = c.staged[:0]
}

func (c *roundCombiner[K, V]) drop() {
	clear(c.merged)
	c.merged = c.merged[:0]
	clear(c.index)
	c.dropStaged()
}

// expired is never called: the combiner has no store.
func (c *roundCombiner[K, V]) expired([]byte, []byte, time.Time) error { return nil }

func (c *roundCombiner[K, V]) advance(int64, time.Time) error { return c.flush() }

// flush passes the round's merged records downstream, each as its own unit
// of work (emitTimed), and forgets them.
func (c *roundCombiner[K, V]) flush() error {
	if len(c.merged) == 0 {
		return nil
	}
	merged := c.merged
	c.merged = nil
	clear(c.index)
	defer func() {
		clear(merged)
		if c.merged == nil {
			c.merged = merged[:0]
		}
	}()
	if c.next == nil {
		return nil
	}
	for i := range merged {
		r := merged[i]
		o := r.Origin
		origin := &kgo.Record{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Timestamp: r.Timestamp}
		if err := c.t.emitTimed(func() error { return failedIn(c.n, c.next(r)) }, origin); err != nil {
			return err
		}
	}
	return nil
}
