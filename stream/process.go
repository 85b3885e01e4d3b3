package stream

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/watermark"
)

// Process is weir's low-level processor (Kafka Streams' Processor API,
// typed): user code handles each record with access to keyed stores it
// declared, forwards any number of records of another type downstream, and
// sets timers that call it back when the task's watermark (event time) or
// the App's processing clock passes them.
//
// State and timers are keyed state of the task: each store is a Pebble store
// of the task with its changelog "<app>-<store>-changelog", and the timers
// live in the store "<name>-timers" (changelog "<app>-<name>-timers-changelog";
// bounded because a timer is deleted when it fires or is deleted). Both are
// restored on a restart or a move like every store, so timers survive them.
// If the key may have changed since the source (KeyBy, GroupBy, Map upstream)
// or s merges several sources, the records are first repartitioned by key
// through "<app>-<name>-repartition" (codecs as for GroupByKey), so that a
// key's state and timers belong to one task.
//
// Timers (they need Processor.OnTimer) fire at the end of a processing
// round, after its records — also in a round that polled nothing for the
// task (a tick) — in time order, then by key and name. So a record is handled
// before the timers its own event time makes due (as with Kafka Streams'
// stream-time punctuation, and Flink's watermarks, which come between
// records): a click 45 minutes after the last one moves a 30-minute session
// timer before it fires, unless an earlier round's watermark already passed
// it (the Driver runs a round per record; an App one per poll). A timer set
// or moved during that firing that is already due fires in the same round.
// A timer (domain, key, name) is one timer: setting it again moves it.
// Event-time timers fire when the watermark reaches their time (watermark >=
// time); processing-time timers when the processing clock does (one that
// came due while the App was down fires in its first round). Each firing is
// one unit, like a record's processing: the timer's deletion, the callback's
// store writes and its forwarded records are applied together or not at
// all, inside the round's transaction under ExactlyOnce (a fired timer's
// outputs appear exactly once). A callback that fails (error or panic) is not
// retried: the timer goes to the dead-letter topic (key: the timer's key,
// value: its name, offset -1; the origin topic is the task's first source
// topic) and is deleted, so it does not fire again.
//
// The output stream counts as re-keyed: a keyed operator after it
// repartitions first.
//
// The handlers run on the task's goroutine, for several tasks at once:
// they keep their state in the declared stores, not in variables they share.
// Declaration errors (no name, an invalid or duplicate store, a store
// without a bound, a codec that cannot be inferred) are returned by NewApp.
func Process[K, V, KO, VO any](s Stream[K, V], cfg ProcessConfig, p Processor[K, V, KO, VO],
	opts ...CodecOpt[K, V],
) Stream[KO, VO] {
	b := s.b
	if !s.valid() {
		return invalid[KO, VO](b)
	}
	ok := true
	if err := validTopic(cfg.Name); err != nil {
		b.addErr(fmt.Errorf("process: name: %w", err))
		ok = false
	}
	if p.OnRecord == nil {
		b.errorf("process %q: OnRecord is nil", cfg.Name)
		ok = false
	}
	g := GroupByKey(s, opts...)
	keyed := len(cfg.Stores) > 0 || p.OnTimer != nil
	if keyed && g.keyErr != nil {
		b.errorf("process %q: key: %v", cfg.Name, g.keyErr)
		ok = false
	}
	names := map[string]bool{}
	for _, st := range cfg.Stores {
		if st == nil {
			b.errorf("process %q: nil store", cfg.Name)
			ok = false
			continue
		}
		sc := st.processStore()
		if names[sc.cfg.Name] {
			b.errorf("process %q: store %q listed twice", cfg.Name, sc.cfg.Name)
			ok = false
		}
		names[sc.cfg.Name] = true
		if !b.declareStore(sc.cfg) {
			ok = false
		}
		if sc.err != nil {
			b.errorf("process %q: store %q: %v", cfg.Name, sc.cfg.Name, sc.err)
			ok = false
		}
	}
	timerStore := ""
	if p.OnTimer != nil && ok {
		timerStore = cfg.Name + "-timers"
		if !b.declareStore(StoreConfig{Name: timerStore, NoExpiry: "timers of process " + cfg.Name +
			": a timer is deleted when it fires"}) {
			ok = false
		}
	}
	if keyed && ok && (s.keyChanged || len(s.sources) != 1) {
		if g.valueErr != nil {
			b.errorf("process %q repartitions its input (its key changed, or it merges sources): value: %v",
				cfg.Name, g.valueErr)
			ok = false
		} else {
			s = repartition(g, cfg.Name)
		}
	}
	if !ok {
		return invalid[KO, VO](b)
	}
	for _, st := range cfg.Stores {
		sc := st.processStore()
		op := "process"
		if sc.window {
			op = "process-window"
		}
		b.stores = append(b.stores, &storeSpec{name: sc.cfg.Name, ttl: sc.cfg.TTL, noExpiry: sc.cfg.NoExpiry,
			source: s.sources[0], op: op, codecs: sc.codecs})
	}
	if timerStore != "" {
		b.stores = append(b.stores, &storeSpec{name: timerStore, noExpiry: "timers: a timer is deleted when it fires",
			source: s.sources[0], op: "process-timers"})
	}
	var n *node
	n = s.link("process", func(t *task, children []any) any {
		next := fanout[KO, VO](children)
		c := &ProcessContext[K, KO, VO]{core: &procCore{t: t, n: n, stores: map[string]*taskStore{},
			logs: map[string]*storeChangelog{}}, key: g.key, next: next}
		for _, st := range cfg.Stores {
			name := st.processStore().cfg.Name
			ts := t.store(name)
			c.core.stores[name] = ts
			c.core.logs[name] = newStoreChangelog(t, n.id, ts, nil)
		}
		if timerStore != "" {
			ts := t.store(timerStore)
			c.core.logs[timerStore] = newStoreChangelog(t, n.id, ts, timerChangelogPhase)
			pt := newProcTimers(c.core, ts)
			c.core.timers = pt
			pt.fire = func(tm timerFired) error {
				k, err := g.key.Decode(tm.key)
				if err != nil {
					return fmt.Errorf("process %s: decode timer key: %w", cfg.Name, err)
				}
				return p.OnTimer(c, Timer[K]{Key: k, Name: tm.name, Time: time.UnixMilli(tm.fire), Domain: tm.domain})
			}
			t.addTimed(pt)
		}
		return func(r Record[K, V]) (err error) {
			defer func() { err = failedIn(n, err) }()
			c.core.enterRecord(r.Timestamp, r.Headers, r.Origin)
			return p.OnRecord(c, r)
		}
	})
	if n == nil {
		return invalid[KO, VO](b)
	}
	n.name = "process-" + cfg.Name
	if cfg.Retry != nil {
		cfg.Retry.applyOp(n)
		b.validateOp(n)
	}
	return Stream[KO, VO]{b: b, n: n, sources: s.sources, keyChanged: true}
}

// ProcessConfig declares a Process operator.
type ProcessConfig struct {
	// Name of the operator, unique in the topology: it names the timer
	// store "<name>-timers" and the repartition topic
	// "<app>-<name>-repartition" when one is needed.
	Name string
	// Stores the processor reads and writes, declared with KeyValueStore
	// or KeyValueWindowStore;
	// each states its bound (TTL or NoExpiry) as StoreConfig requires. A
	// handler can use only the stores listed here.
	Stores []ProcessStore
	// Retry is the error policy of OnRecord (nil: the App's), as an
	// operator's Retry option. Timer callbacks are not retried.
	Retry *Retry
}

// Processor is the user code of a Process operator.
type Processor[K, V, KO, VO any] struct {
	// OnRecord handles one input record. An error (or panic) is handled
	// as any operator's: retried per the error policy, then dead-lettered;
	// nothing of a failed attempt (store writes, timers, forwards) is kept.
	OnRecord func(c *ProcessContext[K, KO, VO], r Record[K, V]) error
	// OnTimer handles a fired timer (nil: the processor sets none). The
	// timer is already deleted; setting it again from here re-arms it.
	OnTimer func(c *ProcessContext[K, KO, VO], tm Timer[K]) error
}

// TimerDomain is the time a timer follows.
type TimerDomain byte

const (
	// EventTimer fires when the task's watermark reaches its time.
	EventTimer TimerDomain = 'e'
	// ProcessingTimer fires when the App's processing clock
	// (ProcessingClock; wall time by default) reaches its time.
	ProcessingTimer TimerDomain = 'p'
)

// String returns "event-time" or "processing-time".
func (d TimerDomain) String() string {
	if d == ProcessingTimer {
		return "processing-time"
	}
	return "event-time"
}

// Timer is a fired timer, as OnTimer receives it.
type Timer[K any] struct {
	Key    K
	Name   string
	Time   time.Time // the time it was set for (millisecond precision)
	Domain TimerDomain
}

// RecordMeta is the metadata of what a processor handles: the record's
// timestamp, headers and origin; for a timer, its time (event time) or the
// task's stream time (processing time), no headers, and no origin.
type RecordMeta struct {
	Timestamp time.Time
	Headers   []Header
	Origin    Origin
}

// procCore is the untyped part of a Process operator's instance in one task.
type procCore struct {
	t      *task
	n      *node
	stores map[string]*taskStore
	// logs: per store (the timers' too), its collapsed changelog writes
	// (see put).
	logs   map[string]*storeChangelog
	timers *procTimers // nil: no OnTimer
	// windows: per window store, the keys written in the open Txn
	// (process_window.go).
	windows map[string]*windowDirty
	meta    RecordMeta
	// wm is the task's watermark at the end of the previous round
	// (watermark.Min: none yet).
	wm int64
}

func (c *procCore) enterRecord(ts time.Time, hs []Header, o Origin) {
	c.meta = RecordMeta{Timestamp: ts, Headers: hs, Origin: o}
}

// ProcessContext is what a processor's handlers are given: its stores (see
// KeyValueStore), Forward, the current record's metadata, the task's
// watermark and processing time, and timers. It is valid only during the
// call it is given to.
type ProcessContext[K, KO, VO any] struct {
	core *procCore
	key  Codec[K]
	next func(Record[KO, VO]) error
}

func (c *ProcessContext[K, KO, VO]) processCore() *procCore { return c.core }

// Forward sends r to the operators downstream. A zero Timestamp becomes the
// current record's (or timer's), nil Headers and a zero Origin the current
// record's (as every operator carries them, a traceparent among them). Its
// error (an operator downstream failed) should be returned by the handler.
func (c *ProcessContext[K, KO, VO]) Forward(r Record[KO, VO]) error {
	if r.Timestamp.IsZero() {
		r.Timestamp = c.core.meta.Timestamp
	}
	if r.Headers == nil {
		r.Headers = c.core.meta.Headers
	}
	if r.Origin == (Origin{}) {
		r.Origin = c.core.meta.Origin
	}
	r.keyEnc, r.valueEnc = encoded{}, encoded{}
	return c.next(r)
}

// Meta returns the metadata of the record (or timer) being handled.
func (c *ProcessContext[K, KO, VO]) Meta() RecordMeta { return c.core.meta }

// Watermark returns the task's watermark as of the end of its previous
// round (false: none yet — some input has delivered nothing). At the end of
// a bounded run it is the largest millisecond time (the end of time).
func (c *ProcessContext[K, KO, VO]) Watermark() (time.Time, bool) {
	if c.core.wm == watermark.Min {
		return time.Time{}, false
	}
	return time.UnixMilli(c.core.wm), true
}

// Now returns the App's processing time (ProcessingClock).
func (c *ProcessContext[K, KO, VO]) Now() time.Time { return c.core.t.app.cfg.clock.Now() }

// SetEventTimer sets (or moves) the event-time timer (key, name) to fire
// at: when the watermark reaches at. A time the watermark already passed
// fires at the end of this round.
func (c *ProcessContext[K, KO, VO]) SetEventTimer(key K, name string, at time.Time) error {
	return c.setTimer(EventTimer, key, name, at)
}

// SetProcessingTimer sets (or moves) the processing-time timer (key, name)
// to fire when the processing clock reaches at.
func (c *ProcessContext[K, KO, VO]) SetProcessingTimer(key K, name string, at time.Time) error {
	return c.setTimer(ProcessingTimer, key, name, at)
}

// DeleteEventTimer deletes the event-time timer (key, name), if set.
func (c *ProcessContext[K, KO, VO]) DeleteEventTimer(key K, name string) error {
	return c.deleteTimer(EventTimer, key, name)
}

// DeleteProcessingTimer deletes the processing-time timer (key, name), if set.
func (c *ProcessContext[K, KO, VO]) DeleteProcessingTimer(key K, name string) error {
	return c.deleteTimer(ProcessingTimer, key, name)
}

// errNoTimers is returned for a timer call of a processor without OnTimer.
var errNoTimers = fmt.Errorf("process: timers need Processor.OnTimer")

func (c *ProcessContext[K, KO, VO]) setTimer(d TimerDomain, key K, name string, at time.Time) error {
	if c.core.timers == nil {
		return errNoTimers
	}
	kb, err := c.key.Encode(key)
	if err != nil {
		return fmt.Errorf("timer: encode key: %w", err)
	}
	return c.core.timers.set(d, kb, name, at.UnixMilli())
}

func (c *ProcessContext[K, KO, VO]) deleteTimer(d TimerDomain, key K, name string) error {
	if c.core.timers == nil {
		return errNoTimers
	}
	kb, err := c.key.Encode(key)
	if err != nil {
		return fmt.Errorf("timer: encode key: %w", err)
	}
	return c.core.timers.delete(d, kb, name)
}

// ProcessStore is a store declaration a Process operator lists in
// ProcessConfig.Stores (made by KeyValueStore or KeyValueWindowStore).
type ProcessStore interface {
	processStore() *procStoreDecl
}

type procStoreDecl struct {
	cfg    StoreConfig
	codecs *storeCodecs // nil: not queryable by typed key
	err    error
	window bool // a window store
}

// StoreAccess is a handler's access to its processor's stores: the
// *ProcessContext it was given.
type StoreAccess interface {
	processCore() *procCore
}

// KVStore is a typed key-value store of Process operators: declare it with
// KeyValueStore, list it in ProcessConfig.Stores, and read and write it from
// the handlers with the context they were given. Keys are per task: a key
// lives in the task handling it (Process repartitions by the record key). It
// is queryable by its name like a table's store (App.Get, QueryStore).
type KVStore[K, V any] struct {
	decl  procStoreDecl
	key   Codec[K]
	value Codec[V]
}

// KeyValueStore declares a typed key-value store for Process. Codecs are
// inferred (InferCodec) or given with Codecs; cfg states the bound as
// StoreConfig requires (EveryUpdate does not apply: its changelog gets a
// key's latest value by every commit, none for a key created and deleted
// between two).
func KeyValueStore[K, V any](cfg StoreConfig, opts ...CodecOpt[K, V]) *KVStore[K, V] {
	s := &KVStore[K, V]{decl: procStoreDecl{cfg: cfg}}
	for _, o := range opts {
		s.key, s.value = cmpOr(o.key, s.key), cmpOr(o.value, s.value)
	}
	var kerr, verr error
	if s.key == nil {
		s.key, kerr = InferCodec[K]()
	}
	if s.value == nil {
		s.value, verr = InferCodec[V]()
	}
	switch {
	case kerr != nil:
		s.decl.err = fmt.Errorf("key: %w", kerr)
	case verr != nil:
		s.decl.err = fmt.Errorf("value: %w", verr)
	default:
		s.decl.codecs = newStoreCodecs(s.key, s.value)
	}
	return s
}

func (s *KVStore[K, V]) processStore() *procStoreDecl { return &s.decl }

// Name returns the store's name.
func (s *KVStore[K, V]) Name() string { return s.decl.cfg.Name }

func (s *KVStore[K, V]) handle(a StoreAccess) (*taskStore, error) { return storeHandle(a, &s.decl) }

// Get returns key's value (found false: absent).
func (s *KVStore[K, V]) Get(a StoreAccess, key K) (v V, found bool, err error) {
	st, err := s.handle(a)
	if err != nil {
		return v, false, err
	}
	kb, err := s.key.Encode(key)
	if err != nil {
		return v, false, fmt.Errorf("store %s: encode key: %w", st.spec.name, err)
	}
	b, found, err := st.get(kb)
	if err != nil || !found {
		return v, false, err
	}
	if v, err = s.value.Decode(b); err != nil {
		return v, false, fmt.Errorf("store %s: decode stored value: %w", st.spec.name, err)
	}
	return v, true, nil
}

// Put sets key to v. The key's update time (for its TTL) is the current
// record's (or timer's) timestamp.
func (s *KVStore[K, V]) Put(a StoreAccess, key K, v V) error {
	st, err := s.handle(a)
	if err != nil {
		return err
	}
	kb, err := s.key.Encode(key)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", st.spec.name, err)
	}
	vb, err := s.value.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: encode value: %w", st.spec.name, err)
	}
	return a.processCore().put(st, kb, vb, a.processCore().meta.Timestamp)
}

// Delete removes key (a tombstone goes to the changelog, unless the key
// never reached it).
func (s *KVStore[K, V]) Delete(a StoreAccess, key K) error {
	st, err := s.handle(a)
	if err != nil {
		return err
	}
	kb, err := s.key.Encode(key)
	if err != nil {
		return fmt.Errorf("store %s: encode key: %w", st.spec.name, err)
	}
	return a.processCore().delete(st, kb, a.processCore().meta.Timestamp)
}

// A Process operator's stores (key-value, window, timers) write the store
// at once and collapse their changelog records between flushes
// (storeChangelog, window_changelog.go): a key written many times between
// two flushes gets one record, its latest value or a tombstone; a key
// created and deleted between two flushes gets none. The task flushes them
// with its tables: before every commit of input offsets (at-least-once),
// inside every transaction before it commits (ExactlyOnce), at the end of
// a round whose collapsed writes exceed collapseBound, at the end of every
// round of the Driver; an abort drops them with the transaction's store
// writes; a failed unit (record, timer firing) drops its own (staged until
// it succeeds). Every store of the operator is cut at the same flushes, so
// a restore gives them the state of one point in the input (at-least-once
// replays the input from the committed offset onto it), never a timer
// store ahead of the stores its callbacks read.

// put sets key of store st to value in the unit being processed; its
// changelog record is collapsed (see above).
func (c *procCore) put(st *taskStore, key, value []byte, ts time.Time) error {
	txn := c.t.txn
	_, _, found, err := txn.Get(st.spec.name, key)
	if err != nil {
		return fmt.Errorf("store %s: %w", st.spec.name, err)
	}
	updated, err := txn.Put(st.spec.name, key, value, ts.UnixMilli())
	if err != nil {
		return fmt.Errorf("store %s: %w", st.spec.name, err)
	}
	c.logs[st.spec.name].write(key, value, updated, !found)
	return nil
}

// delete deletes key from store st in the unit being processed, if the
// store has it; its tombstone is collapsed (see above).
func (c *procCore) delete(st *taskStore, key []byte, ts time.Time) error {
	txn := c.t.txn
	_, _, found, err := txn.Get(st.spec.name, key)
	if err != nil || !found {
		if err != nil {
			return fmt.Errorf("store %s: %w", st.spec.name, err)
		}
		return nil // nothing to delete: its changelog holds no live value
	}
	if err := txn.Delete(st.spec.name, key); err != nil {
		return fmt.Errorf("store %s: %w", st.spec.name, err)
	}
	c.logs[st.spec.name].write(key, nil, ts.UnixMilli(), false)
	return nil
}

// timerOrigin is the record a failed timer callback is dead-lettered as:
// the first source topic of the task, its partition, offset -1, key the
// timer's key, value its name.
func (c *procCore) timerOrigin(key []byte, name string) *kgo.Record {
	topic := ""
	for tp := range c.t.entries {
		if topic == "" || tp < topic {
			topic = tp
		}
	}
	return &kgo.Record{Topic: topic, Partition: c.t.id.partition, Offset: -1, Key: key, Value: []byte(name)}
}
