package stream

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// restore brings the task's stores up to the end of their changelog
// partitions before the task processes anything.
//
// If the local database has a checkpoint for every store, only the changelog
// tail from the checkpointed offsets is replayed (the database already holds
// everything below them, and maybe more: replaying full values in order
// converges to the changelog's state either way). Otherwise — no checkpoint,
// an unreadable one, or a changelog shorter than the checkpoint (the topic was
// recreated) — the local database is wiped and rebuilt from the start.
//
// A table's changelog is its source topic, which the task also consumes: it
// is restored only up to the group's committed offset of the task's
// partition (where consumption resumes), never beyond, so a stream record
// processed after the restore sees the table as of its own position.
func (t *task) restore(ctx context.Context) error {
	if t.db == nil {
		return nil
	}
	a := t.app
	start := time.Now()
	cp, err := t.db.Checkpoint()
	if err != nil {
		a.cfg.logger.Warn("unreadable checkpoint; restoring from the start of the changelogs",
			"task", t.id.String(), "err", err)
		cp = nil
	}
	topics := make([]string, len(t.stores))
	for i, s := range t.stores {
		topics[i] = s.changelog
	}
	// Restore up to the high watermark, or under ExactlyOnce the last
	// stable offset: records of open transactions are not state yet.
	ends, err := a.path.changelogEnds(ctx, a.adm, topics...)
	if err != nil {
		return fmt.Errorf("task %s: changelog end offsets: %w", t.id, err)
	}
	if err := t.tableRestoreEnds(ctx, ends); err != nil {
		return err
	}
	end := map[string]int64{}
	full := cp == nil
	for _, s := range t.stores {
		o, ok := ends.Lookup(s.changelog, t.id.partition)
		if !ok || o.Err != nil {
			return fmt.Errorf("task %s: changelog %s-%d end offset: %v", t.id, s.changelog, t.id.partition, o.Err)
		}
		end[s.changelog] = o.Offset
		if c, ok := cp[s.spec.name]; !ok || c > o.Offset {
			switch {
			case ok && s.spec.table:
				// The local table holds updates past the group's committed
				// offset, from which the task processes the topic again:
				// they must not be seen (a standby of an older version
				// tailed to the end; or the offsets were reset).
				a.cfg.logger.Warn("local table is ahead of the group's committed offset; full restore",
					"task", t.id.String(), "topic", s.changelog, "checkpoint", c, "committed", o.Offset)
			case ok:
				a.cfg.logger.Warn("changelog ends before the local checkpoint (recreated?); full restore",
					"task", t.id.String(), "changelog", s.changelog, "checkpoint", c, "end", o.Offset)
			}
			full = true
		}
	}
	from := map[string]map[int32]kgo.Offset{}
	var pending int
	for _, s := range t.stores {
		off := kgo.NewOffset().AtStart()
		if !full {
			off = kgo.NewOffset().At(cp[s.spec.name])
			if cp[s.spec.name] >= end[s.changelog] {
				continue
			}
		}
		if end[s.changelog] == 0 {
			continue
		}
		from[s.changelog] = map[int32]kgo.Offset{t.id.partition: off}
		pending++
	}
	if full {
		if err := t.db.Wipe(); err != nil {
			return err
		}
	}
	n, reached, err := t.replay(ctx, from, end)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped (SIGTERM, a rebalance): keep what was restored, so
			// the next start replays only the rest.
			t.checkpointRestored(cp, full, from, end, reached)
		}
		return err
	}
	t.clMu.Lock()
	for topic, e := range end {
		t.clEnd[topic] = e
	}
	t.clMu.Unlock()
	if err := t.checkpoint(); err != nil {
		return err
	}
	// Resume stream time from the state: the latest update of any key.
	// TTL expiry after a restore then continues where it left off instead
	// of waiting for the next record.
	for _, s := range t.stores {
		ts, ok, err := t.db.MaxTS(s.spec.name)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.id, err)
		}
		if ok && ts > t.streamTime {
			t.streamTime = ts
		}
	}
	d := time.Since(start)
	a.metrics.restored.Add(float64(n))
	a.metrics.restoreSecs.Add(d.Seconds())
	a.cfg.logger.Info("task restored", "task", t.id.String(), "full", full, "records", n,
		"changelogs", pending, "duration", d)
	return nil
}

// checkpointRestored checkpoints a restore that stopped early: each
// changelog's position reached (one past the last record applied and
// committed to the local database), or where its replay started if it
// applied nothing (0 after a wipe, else the old checkpoint), or its end if it
// needed no replay. A failure is logged: the next start then restores as if
// this one had not run.
func (t *task) checkpointRestored(cp state.Checkpoint, full bool, from map[string]map[int32]kgo.Offset,
	end, reached map[string]int64,
) {
	t.clMu.Lock()
	for _, s := range t.stores {
		topic := s.changelog
		switch {
		case from[topic] == nil:
			t.clEnd[topic] = end[topic]
		case reached[topic] > 0:
			t.clEnd[topic] = reached[topic]
		case full:
			t.clEnd[topic] = 0
		default:
			t.clEnd[topic] = cp[s.spec.name]
		}
	}
	t.clMu.Unlock()
	if err := t.checkpoint(); err != nil {
		t.app.cfg.logger.Warn("checkpoint of a stopped restore failed; the next start restores again",
			"task", t.id.String(), "err", err)
		return
	}
	t.app.cfg.logger.Info("restore stopped; what it restored is checkpointed", "task", t.id.String(),
		"checkpoint", t.lastCheckpoint)
}

// replay applies the changelog records in [from, end) of the task's
// partition to the local stores. reached is, per changelog, one past the
// last record applied (all of them committed to the local database), also
// when it stops early with an error.
func (t *task) replay(ctx context.Context, from map[string]map[int32]kgo.Offset, end map[string]int64) (n int, reached map[string]int64, err error) {
	if len(from) == 0 {
		return 0, nil, nil
	}
	a := t.app
	store := map[string]string{}
	for _, s := range t.stores {
		store[s.changelog] = s.spec.name
	}
	// Control records (transaction markers) are kept so the position
	// visibly reaches an end offset just past a marker (a table's committed
	// offset steps over the markers of a transactional source topic).
	opts := a.clientOpts(append([]kgo.Opt{
		kgo.ConsumePartitions(from),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords(),
	}, a.path.readOpts()...)...)
	rc, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, nil, fmt.Errorf("task %s: restore client: %w", t.id, err)
	}
	defer rc.Close()
	pos := map[string]int64{}       // one past the last record fetched
	committed := map[string]int64{} // pos as of the last batch committed locally
	done := func() bool {
		for topic := range from {
			if pos[topic] < end[topic] {
				return false
			}
		}
		return true
	}
	remaining := func() (left int64) {
		for topic := range from {
			if p, ok := pos[topic]; ok {
				left += max(0, end[topic]-p)
			} else {
				left += end[topic] // lower bound unknown until the first record
			}
		}
		return left
	}
	defer a.metrics.restoreLeft.Set(0)
	for !done() {
		a.metrics.restoreLeft.Set(float64(remaining()))
		fetches := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			return n, committed, ctx.Err()
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			ferr = fmt.Errorf("task %s: restore %s-%d: %w", t.id, topic, p, err)
		})
		if ferr != nil {
			return n, committed, ferr
		}
		txn := t.db.Begin()
		var applyErr error
		fetches.EachRecord(func(r *kgo.Record) {
			if applyErr != nil {
				return
			}
			if r.Offset >= end[r.Topic] {
				// Every record below the end was fetched (those not seen
				// are gone: compacted away, or aborted).
				pos[r.Topic] = max(pos[r.Topic], end[r.Topic])
				return
			}
			pos[r.Topic] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			if spec := t.app.stores[store[r.Topic]]; spec.table && !spec.accepts(r) {
				return // what processing the table's topic would skip (or dead-letter)
			}
			applyErr = applyStoreChangelog(txn, t.app.stores[store[r.Topic]], r)
			n++
		})
		if applyErr == nil {
			// Straight to the local database: a restore writes each key
			// about once, so holding the writes in the cache saves nothing.
			applyErr = txn.CommitThrough()
		}
		txn.Discard()
		if applyErr != nil {
			return n, committed, fmt.Errorf("task %s: restore: %w", t.id, applyErr)
		}
		maps.Copy(committed, pos)
		if f := a.cfg.seams.restoreBatch; f != nil {
			f(n)
		}
	}
	return n, committed, nil
}

// applyChangelog applies one changelog record to store: a value is the key's
// new state (as of the record's timestamp), a nil value a deletion.
func applyChangelog(txn *state.Txn, store string, r *kgo.Record) error {
	if r.Value == nil {
		return txn.Delete(store, r.Key)
	}
	// The store retains the value: copy it out of the fetch buffer, which
	// it would otherwise keep alive.
	_, err := txn.Put(store, r.Key, append([]byte{}, r.Value...), r.Timestamp.UnixMilli())
	return err
}

// tableRestoreEnds replaces, for the task's table stores, the end offset of
// the source topic by the group's committed offset of the task's partition
// (0 if none: consumption starts at the beginning).
func (t *task) tableRestoreEnds(ctx context.Context, ends kadm.ListedOffsets) error {
	var tables []string
	for _, s := range t.stores {
		if s.spec.table {
			tables = append(tables, s.changelog)
		}
	}
	if len(tables) == 0 {
		return nil
	}
	committed, err := t.app.adm.FetchOffsetsForTopics(ctx, t.app.id, tables...)
	if err != nil {
		return fmt.Errorf("task %s: committed offsets of tables: %w", t.id, err)
	}
	for _, topic := range tables {
		at := int64(0)
		if o, ok := committed.Lookup(topic, t.id.partition); ok {
			if o.Err != nil {
				return fmt.Errorf("task %s: committed offset of %s-%d: %w", t.id, topic, t.id.partition, o.Err)
			}
			at = max(0, o.At)
		}
		lo, ok := ends.Lookup(topic, t.id.partition)
		if !ok {
			continue // reported by the caller
		}
		lo.Offset = min(at, lo.Offset)
		ends[topic][t.id.partition] = lo
	}
	return nil
}

// tablesCommitted records, after an ExactlyOnce transaction of tasks
// committed, that their table stores hold their source topics up to the
// input offsets it committed (the tasks' next offsets): their checkpoints
// then advance with each transaction, so a restart on the same state
// replays only what was committed since, and the tables' writes reach the
// database (where queries read them) at that checkpoint.
func tablesCommitted(tasks []*task) {
	for _, t := range tasks {
		next := make(map[string]int64, len(t.next))
		for topic, o := range t.next {
			next[topic] = o.Offset
		}
		t.tablesCovered(next)
	}
}
