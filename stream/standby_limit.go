package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Standby copies of tables.
//
// A table's changelog is its source topic, which the active task also
// consumes as an input. The active task's table therefore stands at the
// group's committed offset of that input partition when another instance
// takes the task over: the new owner restores the table up to the committed
// offset (task.tableRestoreEnds) and processes the source from there. A
// standby copy that tailed the source topic to its end would hold table
// values from the future of that position: a stream record re-processed
// from the committed offset would be joined with them, and under
// ExactlyOnce the replayed outputs would differ from the aborted run's.
//
// So a standby applies a table's source topic only below a limit: the group's
// committed offset of the task's partition (Kafka Streams' "limit offset" of
// a source-topic changelog in StoreChangelogReader). The limits are read with
// an OffsetFetch of the App's group (every partition of every table topic,
// shared by the instance's standbys: one request per commit interval); under
// ExactlyOnce an offset staged in an open transaction is not returned until
// the transaction commits, which is what the limit must be. Records fetched at or past the
// limit are held (at most one fetch of the partition: its consumption is
// paused until the limit passes them) and applied once the limit moves past
// them.
//
// Invariant: every table record a standby applied lies below a committed
// offset of its partition; its position, hence its checkpoint, is at most
// that offset. Committed offsets only grow while the group is active, so a
// takeover restores exactly [standby checkpoint, committed offset), the
// records the active task committed since the standby's last limit. Within a
// session a limit never decreases (the shared offsets are merged by maximum,
// so a stale answer cannot lower it): the group's offsets can be reset only
// while it has no member, so not while this instance runs standbys.
//
// A copy that is ahead of the committed offset (written by an older version
// that tailed to the end, or before the group's offsets were reset
// backwards) cannot be rewound: the standby at its start (from a fresh
// OffsetFetch) and the restore (checkpoint past the committed offset) wipe
// the task's local stores and rebuild them from the start. State written
// past a checkpoint that is not itself past the committed offset is not
// detected (an older standby killed between its applies and its next
// checkpoint).

// sharedLimits caches the group's committed offsets of the table source
// topics for the instance's standbys. Goroutine-safe; its lock is taken
// alone.
type sharedLimits struct {
	mu      sync.Mutex
	at      time.Time                  // clock time of the last fetch
	offsets map[string]map[int32]int64 // topic -> partition -> committed offset
}

// reset forgets the offsets (a new session: the group may have been reset).
func (c *sharedLimits) reset() {
	c.mu.Lock()
	c.offsets = nil
	c.mu.Unlock()
}

// limits returns the group's committed offsets of partition p of topics (0
// where none is committed). fresh: from a fetch made now, replacing the
// cached ones (a standby's start); else from one at most a commit interval
// old, each offset the largest seen in the session.
func (m *standbyManager) limits(ctx context.Context, adm *kadm.Client, p int32, topics []string, fresh bool) (map[string]int64, error) {
	c := &m.shared
	c.mu.Lock()
	defer c.mu.Unlock()
	a := m.a
	now := a.cfg.clock.Now()
	if fresh || c.offsets == nil || now.Sub(c.at) >= a.cfg.commitInterval {
		var all []string
		for _, name := range sortedKeys(a.stores) {
			if s := a.stores[name]; s.table {
				all = append(all, a.storeChangelog(s))
			}
		}
		got, err := fetchCommitted(ctx, adm, a.id, all)
		if err != nil {
			return nil, err
		}
		if fresh || c.offsets == nil {
			c.offsets = got
		} else {
			for topic, ps := range got {
				if c.offsets[topic] == nil {
					c.offsets[topic] = map[int32]int64{}
				}
				for part, off := range ps {
					c.offsets[topic][part] = max(c.offsets[topic][part], off)
				}
			}
		}
		c.at = now
	}
	out := make(map[string]int64, len(topics))
	for _, topic := range topics {
		out[topic] = c.offsets[topic][p]
	}
	return out, nil
}

// sourceLimit holds a standby's limit on one table source partition.
type sourceLimit struct {
	// limit is the group's committed offset of the partition (0 if none):
	// records at or past it are not applied.
	limit int64
	// held are fetched records at or past limit, in offset order, not
	// applied yet.
	held []*kgo.Record
	// paused: the partition is removed from the client's consumption while
	// records are held; it resumes at resume, one past the last held
	// record, once they are applied.
	paused bool
	resume int64
}

// fetchCommitted returns the group's committed offsets of every partition of
// topics that has one (none: the active task consumes from the start, a
// limit of 0).
func fetchCommitted(ctx context.Context, adm *kadm.Client, group string, topics []string) (map[string]map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if err != nil {
		return nil, fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	out := map[string]map[int32]int64{}
	var errs []error
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("committed offset of %s-%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = max(0, o.At)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// standbyTables returns the source topics of st's table stores (their
// changelogs, applied below a limit).
func (m *standbyManager) standbyTables(st *standbyTask) []string {
	var topics []string
	for _, s := range st.stores {
		if s.table {
			topics = append(topics, m.a.storeChangelog(s))
		}
	}
	return topics
}

// limiter applies a standby's fetched records to its stores, holding back
// table records at or past their limit. It belongs to the standby's
// goroutine.
type limiter struct {
	cl        *kgo.Client
	partition int32
	limits    map[string]*sourceLimit // by table source topic
	// pos maps a topic to one past the last record applied (or skipped);
	// seen to one past the last record fetched (applied, skipped or held).
	pos  map[string]int64
	seen map[string]int64
}

// admit decides for a fetched record r: apply it now (true), or not (held,
// or already applied). It advances pos past records at or past a limit that
// leave nothing unapplied below the limit.
func (l *limiter) admit(r *kgo.Record) bool {
	if r.Partition != l.partition || r.Offset < l.pos[r.Topic] {
		return false
	}
	sl := l.limits[r.Topic]
	if sl == nil {
		l.seen[r.Topic] = max(l.seen[r.Topic], r.Offset+1)
		return true
	}
	if sl.paused || (len(sl.held) > 0 && r.Offset <= sl.held[len(sl.held)-1].Offset) {
		// Fetched before the pause took effect, or again: it is
		// re-fetched (or held) from sl.resume on.
		return false
	}
	l.seen[r.Topic] = max(l.seen[r.Topic], r.Offset+1)
	if len(sl.held) > 0 || r.Offset >= sl.limit {
		sl.held = append(sl.held, r)
		// Every record below r.Offset was fetched: nothing left to apply
		// below the limit.
		l.pos[r.Topic] = max(l.pos[r.Topic], min(r.Offset, sl.limit))
		return false
	}
	return true
}

// pauseHeld stops fetching the table partitions with held records: the
// client drops what it buffered for them; fetching resumes after the held
// records (resumeDrained).
func (l *limiter) pauseHeld() {
	for topic, sl := range l.limits {
		if len(sl.held) == 0 || sl.paused {
			continue
		}
		sl.paused = true
		sl.resume = sl.held[len(sl.held)-1].Offset + 1
		l.cl.RemoveConsumePartitions(map[string][]int32{topic: {l.partition}})
	}
}

// setLimits installs newly fetched limits (a lower one is ignored: limits
// never decrease within a session) and returns, in order, the held records
// now below them: apply them, then settle.
func (l *limiter) setLimits(limits map[string]int64) []*kgo.Record {
	var ready []*kgo.Record
	for topic, limit := range limits {
		sl := l.limits[topic]
		if sl == nil || limit <= sl.limit {
			continue
		}
		sl.limit = limit
		n := 0
		for n < len(sl.held) && sl.held[n].Offset < limit {
			n++
		}
		ready = append(ready, sl.held[:n]...)
		sl.held = append(sl.held[:0:0], sl.held[n:]...)
	}
	return ready
}

// settle advances the position of each table partition whose first held
// record is at or past its limit to the limit: every record below it was
// applied (call after applying the records setLimits returned).
func (l *limiter) settle() {
	for topic, sl := range l.limits {
		if len(sl.held) > 0 {
			l.pos[topic] = max(l.pos[topic], min(sl.held[0].Offset, sl.limit))
		}
	}
}

// resumeDrained fetches again the paused partitions whose held records are
// all applied, from one past the last of them.
func (l *limiter) resumeDrained() {
	for topic, sl := range l.limits {
		if !sl.paused || len(sl.held) > 0 {
			continue
		}
		sl.paused = false
		l.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {l.partition: kgo.NewOffset().At(sl.resume)}})
	}
}

// applicable is the offset up to which topic may be applied now: its end,
// or for a table the smaller of its end and its limit.
func (l *limiter) applicable(topic string, end int64) int64 {
	if sl := l.limits[topic]; sl != nil {
		return min(end, sl.limit)
	}
	return end
}
