package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// GlobalTable is a table replicated whole to every instance of an App
// (Kafka Streams' GlobalKTable): every partition of its topic, in a local
// store of the instance, not of a task. Streams join it on any key derived
// from a record (JoinGlobal, LeftJoinGlobal) with no co-partitioning and no
// repartition; Get reads it.
//
// An instance restores its global tables before it processes anything:
// from its local checkpoint (or the start) up to the topic's end (under
// ExactlyOnce, the last stable offset: committed records only), then it
// keeps consuming the topic on a goroutine of its own while it runs. A
// stream record sees the updates applied so far: there is no ordering by
// timestamp between a global table and the streams that read it (as in
// Kafka Streams). Like a topic's table, the topic is the table's changelog
// (no changelog topic, no TTL: it should be compacted).
type GlobalTable[K, V any] struct {
	b     *Builder
	g     *globalSpec
	key   Codec[K]
	value Codec[V]
}

// globalSpec is a declared global table.
type globalSpec struct {
	topic, store string
	// decodes reports whether a record of the topic decodes (a record that
	// does not is skipped, counted, and logged: there is no task to
	// dead-letter it from).
	decodes func(key, value []byte) bool
	codecs  *storeCodecs // for queries
}

// FromGlobalTable declares a global table read from topic and kept in the
// store named store (unique among the topology's stores). A topic is read
// once per topology: as a stream, a table or a global table.
func FromGlobalTable[K, V any](b *Builder, topic string, key Codec[K], value Codec[V], store string) GlobalTable[K, V] {
	if key == nil || value == nil {
		b.errorf("global table %q: nil codec", topic)
		return GlobalTable[K, V]{}
	}
	if err := validTopic(topic); err != nil {
		b.addErr(fmt.Errorf("global table: %w", err))
		return GlobalTable[K, V]{}
	}
	if err := validTopic(store); err != nil {
		b.addErr(fmt.Errorf("global table %q store: %w", topic, err))
		return GlobalTable[K, V]{}
	}
	for _, s := range b.sources {
		if !s.internal && s.topic == topic {
			b.errorf("global table %q: the topic is already a source (a topic is read once)", topic)
			return GlobalTable[K, V]{}
		}
	}
	for _, st := range b.stores {
		if st.name == store {
			b.errorf("store %q declared twice", store)
			return GlobalTable[K, V]{}
		}
	}
	for _, g := range b.globals {
		if g.topic == topic || g.store == store {
			b.errorf("global table %q (store %q) declared twice", topic, store)
			return GlobalTable[K, V]{}
		}
	}
	g := &globalSpec{topic: topic, store: store, decodes: func(k, v []byte) bool {
		if k == nil {
			return false
		}
		if _, err := key.Decode(k); err != nil {
			return false
		}
		if v == nil {
			return true
		}
		_, err := value.Decode(v)
		return err == nil
	}}
	g.codecs = newStoreCodecs(key, value)
	b.globals = append(b.globals, g)
	return GlobalTable[K, V]{b: b, g: g, key: key, value: value}
}

// Store returns the name of the global table's store.
func (g GlobalTable[K, V]) Store() string {
	if g.g == nil {
		return ""
	}
	return g.g.store
}

// Get reads key from a's replica of the global table (what the instance
// restored and consumed so far). found is false for an absent key.
func (g GlobalTable[K, V]) Get(a *App, key K) (v V, found bool, err error) {
	if g.g == nil {
		return v, false, errors.New("stream: invalid global table")
	}
	kb, err := g.key.Encode(key)
	if err != nil {
		return v, false, fmt.Errorf("global table %s: encode key: %w", g.g.store, err)
	}
	raw, found, err := a.globalGet(g.g.store, kb)
	if err != nil || !found {
		return v, false, err
	}
	v, err = g.value.Decode(raw)
	return v, err == nil, err
}

// JoinGlobal enriches each record of s with the global table's value for the
// key keyOf derives from the record (inner join: a record whose key is
// absent is dropped). No co-partitioning is needed and s is never
// repartitioned: every instance holds the whole table. fn's result keeps the
// record's key, timestamp, headers and origin.
func JoinGlobal[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], keyOf func(Record[K, V]) (KG, error),
	fn func(r Record[K, V], vg VG) (VR, error),
) Stream[K, VR] {
	return joinGlobal(s, g, "join-global", keyOf, func(r Record[K, V], vg VG, found bool) (VR, bool, error) {
		if !found {
			var zero VR
			return zero, false, nil
		}
		v, err := fn(r, vg)
		return v, true, err
	})
}

// LeftJoinGlobal is JoinGlobal keeping every record: fn gets found=false (and
// the zero VG) when the global table has no value for the key.
func LeftJoinGlobal[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], keyOf func(Record[K, V]) (KG, error),
	fn func(r Record[K, V], vg VG, found bool) (VR, error),
) Stream[K, VR] {
	return joinGlobal(s, g, "left-join-global", keyOf, func(r Record[K, V], vg VG, found bool) (VR, bool, error) {
		v, err := fn(r, vg, found)
		return v, true, err
	})
}

func joinGlobal[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], op string, keyOf func(Record[K, V]) (KG, error),
	fn func(Record[K, V], VG, bool) (VR, bool, error),
) Stream[K, VR] {
	if !s.valid() {
		return invalid[K, VR](s.b)
	}
	if g.g == nil || g.b != s.b {
		s.b.errorf("%s: invalid global table, or one from another builder", op)
		return invalid[K, VR](s.b)
	}
	store := g.g.store
	return attach(s, op, false, func(t *task, next func(Record[K, VR]) error) func(Record[K, V]) error {
		return func(r Record[K, V]) error {
			if r.Tombstone {
				return nil // a deletion upstream: nothing to enrich
			}
			kg, err := keyOf(r)
			if err != nil {
				return err
			}
			kb, err := g.key.Encode(kg)
			if err != nil {
				return fmt.Errorf("%s %s: encode key: %w", op, store, err)
			}
			raw, found, err := t.app.globalGet(store, kb)
			if err != nil {
				return &fatalError{err}
			}
			var vg VG
			if found {
				if vg, err = g.value.Decode(raw); err != nil {
					return fmt.Errorf("%s %s: decode value: %w", op, store, err)
				}
			}
			v, emit, err := fn(r, vg, found)
			if err != nil || !emit {
				return err
			}
			return next(Record[K, VR]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers, Origin: r.Origin,
				keyEnc: r.keyEnc})
		}
	})
}

// globalState is an instance's replica of its global tables: one local
// database, written by the goroutine consuming the tables' topics and read
// by tasks and queries; mu serialises every access (a state.DB is used by
// one goroutine at a time).
type globalState struct {
	mu   sync.Mutex
	db   *state.DB
	next map[string]map[int32]int64 // per topic and partition, the next offset to apply
	// spec per topic.
	byTopic map[string]*globalSpec
	skipped int64 // records that did not decode
}

// checkpoint keys of the global database: "<topic>#<partition>" -> next
// offset.
func globalCheckpointKey(topic string, p int32) string { return topic + "#" + strconv.Itoa(int(p)) }

// openGlobals opens the instance's global database (nil if the topology has
// no global table) and reads its checkpoint. A database that does not open
// is deleted and rebuilt from the topics.
func (a *App) openGlobals() (*globalState, error) {
	if len(a.b.globals) == 0 {
		return nil, nil
	}
	dir := filepath.Join(a.cfg.stateDir, a.id, "global")
	var opts []state.Option
	for _, g := range a.b.globals {
		opts = append(opts, state.StoreTTL(g.store, 0))
	}
	logger := a.cfg.logger.With("global", true)
	db, err := state.Open(dir, logger, opts...)
	if err != nil {
		a.cfg.logger.Warn("global store unusable; restoring it from its topics", "dir", dir, "err", err)
		if rerr := os.RemoveAll(dir); rerr != nil {
			return nil, fmt.Errorf("global tables: %w (and removing it: %v)", err, rerr)
		}
		if db, err = state.Open(dir, logger, opts...); err != nil {
			return nil, fmt.Errorf("global tables: %w", err)
		}
	}
	gs := &globalState{db: db, next: map[string]map[int32]int64{}, byTopic: map[string]*globalSpec{}}
	cp, err := db.Checkpoint()
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("global tables: %w", err)
	}
	for _, g := range a.b.globals {
		gs.byTopic[g.topic] = g
		gs.next[g.topic] = map[int32]int64{}
	}
	for k, off := range cp {
		topic, p, ok := strings.Cut(k, "#")
		n, err := strconv.Atoi(p)
		if ok && err == nil && gs.next[topic] != nil {
			gs.next[topic][int32(n)] = off
		}
	}
	return gs, nil
}

// apply writes fetched records of the global topics to the store, then
// makes them readable (flush) and checkpoints the offsets every interval.
func (gs *globalState) apply(recs []*kgo.Record) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	txn := gs.db.Begin()
	defer txn.Discard()
	for _, r := range recs {
		g := gs.byTopic[r.Topic]
		if g == nil || r.Attrs.IsControl() {
			continue
		}
		if g.decodes(r.Key, r.Value) {
			if err := applyChangelog(txn, g.store, r); err != nil {
				return err
			}
		} else {
			gs.skipped++
		}
		gs.next[r.Topic][r.Partition] = r.Offset + 1
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	return gs.db.Flush()
}

// checkpoint records, synced, the offsets the store holds.
func (gs *globalState) checkpoint() error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	cp := state.Checkpoint{}
	for topic, ps := range gs.next {
		for p, off := range ps {
			cp[globalCheckpointKey(topic, p)] = off
		}
	}
	return gs.db.WriteCheckpoint(cp)
}

func (gs *globalState) get(store string, key []byte) ([]byte, bool, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	v, _, found, err := gs.db.Get(store, key)
	return v, found, err
}

// globalGet reads a global table's store; an instance that has not restored
// its global tables (not running) answers from nothing.
func (a *App) globalGet(store string, key []byte) ([]byte, bool, error) {
	gs, err := a.loadedGlobals(store)
	if err != nil {
		return nil, false, err
	}
	return gs.get(store, key)
}

// restoreGlobals brings the global tables up to their topics' current ends
// (last stable offsets under ExactlyOnce), then returns the client that
// keeps consuming them from there.
func (a *App) restoreGlobals(ctx context.Context, gs *globalState) (*kgo.Client, error) {
	topics := make([]string, 0, len(gs.byTopic))
	for t := range gs.byTopic {
		topics = append(topics, t)
	}
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	ends, err := a.path.changelogEnds(ctx, adm, topics...)
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("global tables: end offsets: %w", err)
	}
	parts := map[string]map[int32]kgo.Offset{}
	want := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if parts[o.Topic] == nil {
			parts[o.Topic], want[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		from, ok := gs.next[o.Topic][o.Partition]
		if ok {
			parts[o.Topic][o.Partition] = kgo.NewOffset().At(from)
		} else {
			parts[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		}
		if o.Offset > from {
			want[o.Topic][o.Partition] = o.Offset
		}
	})
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("global tables: end offsets: %w", err)
	}
	opts := append(a.clientOpts(), kgo.ConsumePartitions(parts))
	opts = append(opts, a.path.readOpts()...)
	gcl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	restored := 0
	for {
		done := true
		for topic, ps := range want {
			for p, end := range ps {
				if gs.next[topic][p] < end {
					done = false
				}
			}
		}
		if done {
			break
		}
		fs := gcl.PollFetches(ctx)
		if ctx.Err() != nil {
			gcl.Close()
			return nil, ctx.Err()
		}
		var recs []*kgo.Record
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			recs = append(recs, p.Records...)
			// A transaction marker may end the partition: the fetch says
			// how far it read.
			if end := a.path.fetchedEnd(p); len(p.Records) == 0 && end >= want[p.Topic][p.Partition] {
				gs.mu.Lock()
				gs.next[p.Topic][p.Partition] = max(gs.next[p.Topic][p.Partition], want[p.Topic][p.Partition])
				gs.mu.Unlock()
			}
		})
		if err := gs.apply(recs); err != nil {
			gcl.Close()
			return nil, fmt.Errorf("global tables: %w", err)
		}
		restored += len(recs)
	}
	if err := gs.checkpoint(); err != nil {
		gcl.Close()
		return nil, fmt.Errorf("global tables: %w", err)
	}
	a.cfg.logger.Info("global tables restored", "records", restored)
	return gcl, nil
}

// tailGlobals applies the global topics' new records until ctx is done,
// checkpointing every checkpoint interval, and once more at the end.
func (a *App) tailGlobals(ctx context.Context, gs *globalState, cl *kgo.Client) {
	defer cl.Close()
	last := time.Now()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			break
		}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if err := gs.apply(recs); err != nil {
			a.fail(fmt.Errorf("global tables: %w", err))
			return
		}
		if time.Since(last) >= a.cfg.checkpointInterval {
			last = time.Now()
			if err := gs.checkpoint(); err != nil {
				a.fail(fmt.Errorf("global tables: %w", err))
				return
			}
		}
	}
	if err := gs.checkpoint(); err != nil {
		a.cfg.logger.Warn("global tables: final checkpoint", "err", err)
	}
}

// startGlobals opens and restores the global tables and starts tailing
// them; the returned stop ends the tail and closes the store. With no global
// table it does nothing.
func (a *App) startGlobals(ctx context.Context) (stop func(), err error) {
	gs, err := a.openGlobals()
	if err != nil || gs == nil {
		return func() {}, err
	}
	cl, err := a.restoreGlobals(ctx, gs)
	if err != nil {
		gs.db.Close()
		return func() {}, err
	}
	a.setGlobals(gs)
	tctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.tailGlobals(tctx, gs, cl) }()
	return func() {
		cancel()
		<-done
		a.setGlobals(nil)
		gs.mu.Lock()
		gs.db.Close()
		gs.mu.Unlock()
	}, nil
}

func (a *App) setGlobals(gs *globalState) { a.globals.Store(gs) }

func (a *App) globalsLoaded() *globalState { return a.globals.Load() }

// isGlobalTopic reports whether topic is a global table's.
func (a *App) isGlobalTopic(topic string) bool {
	for _, g := range a.b.globals {
		if g.topic == topic {
			return true
		}
	}
	return false
}

// driverLoadGlobals opens the Driver's global tables, if not open, restored
// from the records its topics hold (log: the Driver's topics).
func (a *App) driverLoadGlobals(log map[string][]*kgo.Record) error {
	if a.globalsLoaded() != nil {
		return nil
	}
	gs, err := a.openGlobals()
	if err != nil || gs == nil {
		return err
	}
	if err := gs.db.Wipe(); err != nil {
		gs.db.Close()
		return err
	}
	for topic := range gs.byTopic {
		clear(gs.next[topic])
		if err := gs.apply(log[topic]); err != nil {
			gs.db.Close()
			return err
		}
	}
	a.setGlobals(gs)
	return nil
}

// driverApplyGlobal applies a record written to a global table's topic at
// once (the Driver's global tables are always up to date); false if the
// topic is no global table's.
func (a *App) driverApplyGlobal(r *kgo.Record) (bool, error) {
	gs := a.globalsLoaded()
	if gs == nil || gs.byTopic[r.Topic] == nil {
		return false, nil
	}
	return true, gs.apply([]*kgo.Record{r})
}

// closeGlobals closes the global tables' store (the Driver's).
func (a *App) closeGlobals() error {
	gs := a.globalsLoaded()
	if gs == nil {
		return nil
	}
	a.setGlobals(nil)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.db.Close()
}
