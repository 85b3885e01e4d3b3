package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
	"github.com/weirhq/weir/stream/internal/timekey"
)

// Queryable state: a running App answers point lookups and key-range scans
// on its stores, for keys of any partition. A key's partition is murmur2 of
// its encoded bytes over the store's partitions (the partitioner that placed
// the key, as Java clients do); the instance owning that partition's task
// serves it. A lookup on another instance is forwarded to the owner's query
// endpoint (QueryServer / AdvertisedQueryEndpoint), found in the group view.
//
// Reads see the store as the task last flushed it: under AtLeastOnce the
// state after the last processing round, under ExactlyOnce after the last
// committed transaction. A read never sees a record's partial effects.

// Errors of queries. Those marked retriable clear by themselves (a retry
// after a short backoff succeeds once the group settles); see
// QueryRetriable.
var (
	// ErrUnknownStore: the topology declares no store of that name.
	ErrUnknownStore = errors.New("stream: unknown store")
	// ErrNoRoute: another instance owns the key's partition and does not
	// advertise a query endpoint (it runs without QueryServer or
	// AdvertisedQueryEndpoint).
	ErrNoRoute = errors.New("stream: no route to the store's owner")
	// ErrRebalancing (retriable): the partition is moving, or the group
	// view is not known yet.
	ErrRebalancing = errors.New("stream: rebalance in progress")
	// ErrRestoring (retriable): this instance owns the partition and is
	// restoring its store from the changelog.
	ErrRestoring = errors.New("stream: store is restoring")
	// ErrNotRunning (retriable while the App starts): the App is not in a
	// processing session.
	ErrNotRunning = errors.New("stream: app not running")
	// ErrOwnerUnavailable (retriable): the owner's query endpoint did not
	// answer; the group will move its partitions if it is gone.
	ErrOwnerUnavailable = errors.New("stream: store owner unavailable")
)

// QueryRetriable reports whether a query error clears by itself, so that
// the query is worth retrying after a short backoff.
func QueryRetriable(err error) bool {
	return errors.Is(err, ErrRebalancing) || errors.Is(err, ErrRestoring) ||
		errors.Is(err, ErrNotRunning) || errors.Is(err, ErrOwnerUnavailable)
}

// errNotLocal: the partition is not served by this instance (internal).
var errNotLocal = errors.New("stream: partition not local")

// StoreEntry is one key of a store.
type StoreEntry struct {
	Key, Value []byte
	// Timestamp is the event time of the key's last update.
	Timestamp time.Time
	// Partition is the store partition (the task's) holding the key.
	Partition int32
	// Stale: served by a standby copy (AllowStale), which may lag the
	// active task by its standby lag.
	Stale bool
}

// QueryOpt modifies one query.
type QueryOpt interface{ applyQuery(*queryOpts) }

type queryOpts struct{ stale bool }

type queryOptFunc func(*queryOpts)

func (f queryOptFunc) applyQuery(o *queryOpts) { f(o) }

// AllowStale lets a standby copy (StandbyReplicas) answer when the active
// task cannot: this instance's own copy first, then the instances keeping
// copies. Such answers are marked Stale; they may lag the active task (see
// the weir_stream_standby_lag_records gauge). Kafka Streams calls this
// enableStaleStores.
func AllowStale() QueryOpt { return queryOptFunc(func(o *queryOpts) { o.stale = true }) }

func applyQueryOpts(opts []QueryOpt) queryOpts {
	var o queryOpts
	for _, opt := range opts {
		opt.applyQuery(&o)
	}
	return o
}

// DefaultRangeLimit is the number of entries Range returns when called
// with a limit <= 0.
const DefaultRangeLimit = 1000

// queryConfig holds the options of queryable state.
type queryConfig struct {
	listen     string // QueryServer: serve the HTTP API on this address during Run
	advertised string // AdvertisedQueryEndpoint
	client     *http.Client
	middleware func(http.Handler) http.Handler // QueryMiddleware (query_http.go)
}

// QueryServer makes Run serve the query HTTP API (QueryHandler) on addr
// (host:port; port 0 picks one) and advertise it to the group, so that the
// other instances forward lookups for this instance's partitions to it.
// Unless AdvertisedQueryEndpoint says otherwise, the advertised endpoint is
// the listener's address: give a routable host, not 0.0.0.0. Without
// QueryMiddleware the API has no authentication: serve it on a trusted
// network. Run fails if addr cannot be bound. Default: none.
func QueryServer(addr string) Opt { return optFunc(func(c *config) { c.query.listen = addr }) }

// AdvertisedQueryEndpoint sets the endpoint other instances forward queries
// to (Kafka Streams' application.server): "host:port" or a base URL
// ("https://host:port/prefix") where QueryHandler is served. Use it when the
// App's handler is mounted on the user's own server. Default: the QueryServer
// listener's address, or none.
func AdvertisedQueryEndpoint(endpoint string) Opt {
	return optFunc(func(c *config) { c.query.advertised = endpoint })
}

// QueryHTTPClient sets the client used to forward queries to other
// instances (TLS, timeouts). Default: a client with a 10s timeout.
func QueryHTTPClient(cl *http.Client) Opt { return optFunc(func(c *config) { c.query.client = cl }) }

func (c *config) validateQuery() []error {
	var errs []error
	if c.query.client == nil {
		errs = append(errs, errors.New("nil query HTTP client"))
	}
	if c.standbyReplicas < 0 {
		errs = append(errs, fmt.Errorf("standby replicas %d < 0", c.standbyReplicas))
	}
	return errs
}

// queryState is the App's queryable-state runtime.
//
// Lock order: App.mu may be taken while holding queryState.mu (read), never
// the reverse.
type queryState struct {
	a    *App
	view *viewTracker

	mu sync.RWMutex
	// tasks are the restored, open tasks whose stores may be read. A task
	// leaves before it closes; readers hold mu (read) while they use a
	// task's database, so a close waits for them.
	tasks map[taskID]*task
	// partitions of the store changelogs (a table's: its source topic), copied when a session starts
	// (nil before: ErrNotRunning).
	partitions map[string]int32
	endpoint   string // advertised query endpoint ("" if none)
	// openTask, set for a Driver (every partition is this process's),
	// creates and restores a task not created yet.
	openTask func(taskID) error
	// standbys are the databases of this instance's running standby
	// tasks, readable by AllowStale queries under the same rule as tasks.
	standbys map[taskID]*state.DB
}

func newQueryState(a *App) *queryState {
	return &queryState{a: a, view: newViewTracker(a), tasks: map[taskID]*task{}, standbys: map[taskID]*state.DB{}}
}

// queryEndpoint is the endpoint this instance advertises.
func (a *App) queryEndpoint() string {
	a.query.mu.RLock()
	defer a.query.mu.RUnlock()
	return a.query.endpoint
}

// startQuerySession starts the group view (and the standbys following it)
// for one group session and returns the function stopping them.
func (a *App) startQuerySession(ctx context.Context, cl *kgo.Client) (stop func()) {
	q := a.query
	q.mu.Lock()
	q.partitions = map[string]int32{}
	for name := range a.stores {
		q.partitions[name] = a.partitions[a.storeChangelog(a.stores[name])] // a table: its source topic
	}
	q.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { q.view.run(ctx, cl) })
	return func() {
		cancel()
		wg.Wait()
		q.view.invalidate()
		a.standbys.stopAll()
		q.mu.Lock()
		q.partitions = nil
		q.mu.Unlock()
	}
}

// driverQueries makes a Driver's App answer queries: every partition is
// local, with the partition counts of the driver's topics.
func (a *App) driverQueries(parts func(topic string) int32, open func(taskID) error) {
	a.query.mu.Lock()
	defer a.query.mu.Unlock()
	a.query.openTask = open
	a.query.partitions = map[string]int32{}
	for name := range a.stores {
		a.query.partitions[name] = parts(a.storeChangelog(a.stores[name]))
	}
}

// taskQueryable makes t's stores readable (t is restored).
func (a *App) taskQueryable(t *task) {
	if t.db == nil {
		return
	}
	a.query.mu.Lock()
	a.query.tasks[t.id] = t
	a.query.mu.Unlock()
}

// taskUnqueryable stops reads of t's stores, waiting for the reads under
// way; call before closing t.
func (a *App) taskUnqueryable(t *task) {
	a.query.mu.Lock()
	delete(a.query.tasks, t.id)
	a.query.mu.Unlock()
}

// storeTask is the task holding partition p of the store.
func (a *App) storeTask(spec *storeSpec, p int32) taskID {
	return taskID{sub: a.subOf[spec.source], partition: p}
}

// storeInput is an input partition whose assignment carries partition p of
// the store: the group member assigned it owns the store's task. Owners are
// looked up in the group view by it.
func (a *App) storeInput(spec *storeSpec, p int32) topicPartition {
	return topicPartition{a.topicOf(a.b.sources[spec.source]), p}
}

// keyPartition is the partition of an encoded key among n, as the App's
// partitioner (and Java clients) place keyed records:
// (murmur2(key) & 0x7fffffff) % n.
func keyPartition(key []byte, n int32) int32 {
	return int32((murmur2Hash(key) & 0x7fffffff) % uint32(n))
}

// murmur2Hash is the 32-bit MurmurHash2 with Kafka's seed, as Java's
// org.apache.kafka.common.utils.Utils.murmur2 computes it.
func murmur2Hash(b []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// storeKeyPartition is the partition of store key key of spec's store: a
// windowed store's key ('w' | key | end | start, or its key prefix) lives
// where its grouping key does, every other key by its own bytes.
func storeKeyPartition(spec *storeSpec, key []byte, n int32) int32 {
	if spec.window != "" && len(key) > 0 && key[0] == timekey.TagWindow {
		if k, _, err := timekey.ReadKey(key[1:]); err == nil {
			return keyPartition(k, n)
		}
	}
	return keyPartition(key, n)
}

// queryTarget resolves a store name and its partition count.
func (a *App) queryTarget(store string) (*storeSpec, int32, error) {
	spec, ok := a.stores[store]
	if !ok {
		return nil, 0, fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	a.query.mu.RLock()
	n := a.query.partitions[store]
	a.query.mu.RUnlock()
	if n <= 0 {
		return nil, 0, ErrNotRunning
	}
	return spec, n, nil
}

// readLocal runs fn on the database of partition p of the store if this
// instance serves it; errNotLocal if it does not, ErrRestoring if it owns
// the partition and is restoring it. With stale, a standby copy serves when
// the active task does not (fn is told so).
func (a *App) readLocal(spec *storeSpec, p int32, stale bool, fn func(db *state.DB, standby bool) error) error {
	id := a.storeTask(spec, p)
	q := a.query
	q.mu.RLock()
	t, ok := q.tasks[id]
	if open := q.openTask; !ok && open != nil {
		q.mu.RUnlock()
		if err := open(id); err != nil {
			return err
		}
		q.mu.RLock()
		t, ok = q.tasks[id]
	}
	if ok {
		if done := t.awaitFlush(); done != nil {
			// Committed writes sit in the task's cache: wait (bounded)
			// for the loop to flush them, without holding the lock the
			// loop takes to close tasks.
			q.mu.RUnlock()
			wait := time.NewTimer(flushWaitMax(a.cfg.commitInterval))
			select {
			case <-done:
			case <-wait.C:
			}
			wait.Stop()
			q.mu.RLock()
			if t, ok = q.tasks[id]; !ok {
				q.mu.RUnlock()
				return fmt.Errorf("%w: %s partition %d moved while the read waited", ErrRebalancing, spec.name, p)
			}
		}
	}
	defer q.mu.RUnlock()
	if ok {
		return fn(t.db, false)
	}
	if db, ok := q.standbys[id]; ok && stale {
		return fn(db, true)
	}
	a.mu.Lock()
	restoring := a.assigned[id]
	_, created := a.tasks[id]
	a.mu.Unlock()
	if restoring || created {
		return fmt.Errorf("%w: %s partition %d", ErrRestoring, spec.name, p)
	}
	return errNotLocal
}

// flushWaitMax bounds how long a query waits for the loop to flush a
// task's committed writes (the loop serves it after the open transaction,
// at most a commit interval and a round); past it, the read sees the state
// as of the last flush.
func flushWaitMax(commitInterval time.Duration) time.Duration { return 2*commitInterval + time.Second }

// getLocal reads key from partition p of the store on this instance.
func (a *App) getLocal(spec *storeSpec, p int32, key []byte, stale bool) (StoreEntry, bool, error) {
	var e StoreEntry
	var found bool
	err := a.readLocal(spec, p, stale, func(db *state.DB, standby bool) error {
		if spec.win != nil && spec.win.pane > 0 {
			// A window of a store in pane layout: its panes combined.
			var err error
			if e, found, err = getPaneWindow(db, spec, key); err == nil {
				e.Partition, e.Stale = p, standby
			}
			return err
		}
		v, ts, ok, err := db.Get(spec.name, key)
		if err != nil {
			return err
		}
		found = ok
		e = StoreEntry{Key: append([]byte(nil), key...), Value: v, Timestamp: time.UnixMilli(ts), Partition: p, Stale: standby}
		return nil
	})
	return e, found, err
}

// errStopScan ends a local scan early.
var errStopScan = errors.New("stop scan")

// rangeLocal scans [from, to) of partition p of the store on this instance,
// at most limit entries.
func (a *App) rangeLocal(spec *storeSpec, p int32, from, to []byte, limit int, stale bool) ([]StoreEntry, error) {
	if spec.win != nil && spec.win.rows {
		return a.rangeRows(spec, p, from, to, limit, stale)
	}
	if spec.win != nil && spec.win.pane > 0 {
		return a.rangePanes(spec, p, from, to, limit, stale)
	}
	if spec.window != "" {
		// A windowed store is read as its windows: its close index
		// and other bookkeeping are not entries.
		from, to = timekey.WindowEntries(from, to)
	}
	var out []StoreEntry
	err := a.readLocal(spec, p, stale, func(db *state.DB, standby bool) error {
		err := db.ReadScan(spec.name, from, to, func(k, v []byte, ts int64) error {
			if len(out) >= limit {
				return errStopScan
			}
			out = append(out, StoreEntry{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...),
				Timestamp: time.UnixMilli(ts), Partition: p, Stale: standby})
			return nil
		})
		if errors.Is(err, errStopScan) {
			return nil
		}
		return err
	})
	return out, err
}

// route returns the query endpoint of the member owning partition p of the
// store, for a partition this instance does not serve.
func (a *App) route(spec *storeSpec, p int32) (string, error) {
	v := a.query.view.current()
	if v == nil {
		return "", fmt.Errorf("%w: group view unknown", ErrRebalancing)
	}
	m, ok := v.ownerOf(a.storeInput(spec, p))
	if !ok {
		return "", fmt.Errorf("%w: %s partition %d has no owner", ErrRebalancing, spec.name, p)
	}
	if m.id == v.self {
		// The group gave it to this instance, which has not started it yet
		// (or the view predates a revoke).
		return "", fmt.Errorf("%w: %s partition %d is moving to this instance", ErrRebalancing, spec.name, p)
	}
	ep := m.info.QueryEndpoint
	if ep == "" {
		return "", fmt.Errorf("%w: %s partition %d is owned by member %s", ErrNoRoute, spec.name, p, m.id)
	}
	if ep == a.queryEndpoint() {
		return "", fmt.Errorf("%w: %s partition %d: stale view names this instance", ErrRebalancing, spec.name, p)
	}
	return ep, nil
}

// Get returns the entry of an encoded key in a store, from this instance or
// the instance owning the key's partition (a global table's store: from this
// instance's replica, Partition -1). found is false when the store has no
// such key.
func (a *App) Get(ctx context.Context, store string, key []byte, opts ...QueryOpt) (entry StoreEntry, found bool, err error) {
	if a.isGlobalStore(store) {
		return a.getGlobal(store, key) // every instance holds it whole
	}
	o := applyQueryOpts(opts)
	spec, n, err := a.queryTarget(store)
	if err != nil {
		return StoreEntry{}, false, err
	}
	p := storeKeyPartition(spec, key, n)
	e, found, err := a.getLocal(spec, p, key, o.stale)
	if !errors.Is(err, errNotLocal) && !(o.stale && QueryRetriable(err)) {
		return e, found, err
	}
	if errors.Is(err, errNotLocal) {
		var ep string
		if ep, err = a.route(spec, p); err == nil {
			e, found, err = a.remoteGet(ctx, ep, store, p, key, false)
		}
	}
	if err == nil || !o.stale || !QueryRetriable(err) && !errors.Is(err, ErrNoRoute) {
		return e, found, err
	}
	// The active task cannot answer: ask the standbys' instances.
	for _, ep := range a.standbyEndpoints(spec, p) {
		se, sfound, serr := a.remoteGet(ctx, ep, store, p, key, true)
		if serr == nil {
			return se, sfound, nil
		}
		if ctx.Err() != nil {
			return StoreEntry{}, false, ctx.Err()
		}
	}
	return StoreEntry{}, false, err
}

// standbyEndpoints are the query endpoints of the members keeping standby
// copies of partition p of the store, by the current view.
func (a *App) standbyEndpoints(spec *storeSpec, p int32) []string {
	v := a.query.view.current()
	if v == nil {
		return nil
	}
	var out []string
	self := a.queryEndpoint()
	for _, id := range v.standbysOf(a.storeInput(spec, p), a.cfg.standbyReplicas) {
		for _, m := range v.members {
			if m.id == id && m.info.QueryEndpoint != "" && m.info.QueryEndpoint != self {
				out = append(out, m.info.QueryEndpoint)
			}
		}
	}
	return out
}

// Range returns the entries of a store with from <= key < to (nil: no
// bound) in encoded-key byte order, across all partitions (each owner is
// asked for its own), at most limit (DefaultRangeLimit if limit <= 0). It
// fails as a whole if any partition cannot be read. A global table's store
// is read from this instance's replica.
func (a *App) Range(ctx context.Context, store string, from, to []byte, limit int, opts ...QueryOpt) ([]StoreEntry, error) {
	if a.isGlobalStore(store) {
		return a.rangeGlobal(store, from, to, limit) // every instance holds it whole
	}
	o := applyQueryOpts(opts)
	spec, n, err := a.queryTarget(store)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultRangeLimit
	}
	var out []StoreEntry
	remote := map[string][]int32{}
	var fallback []int32 // partitions for the standbys (AllowStale)
	for p := range n {
		es, err := a.rangeLocal(spec, p, from, to, limit, o.stale)
		if errors.Is(err, errNotLocal) {
			ep, rerr := a.route(spec, p)
			if rerr != nil {
				if o.stale && (QueryRetriable(rerr) || errors.Is(rerr, ErrNoRoute)) {
					fallback = append(fallback, p)
					continue
				}
				return nil, rerr
			}
			remote[ep] = append(remote[ep], p)
			continue
		}
		if err != nil {
			if o.stale && QueryRetriable(err) {
				fallback = append(fallback, p)
				continue
			}
			return nil, err
		}
		out = append(out, es...)
	}
	for _, ep := range sortedKeys(remote) {
		es, err := a.remoteRange(ctx, ep, store, remote[ep], from, to, limit, false)
		if err != nil {
			if o.stale && QueryRetriable(err) {
				fallback = append(fallback, remote[ep]...)
				continue
			}
			return nil, err
		}
		out = append(out, es...)
	}
	for _, p := range fallback {
		es, err := a.rangeFromStandbys(ctx, spec, p, from, to, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	slices.SortFunc(out, func(x, y StoreEntry) int { return bytes.Compare(x.Key, y.Key) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// rangeFromStandbys reads partition p from an instance keeping a standby
// copy of it.
func (a *App) rangeFromStandbys(ctx context.Context, spec *storeSpec, p int32, from, to []byte, limit int) ([]StoreEntry, error) {
	err := fmt.Errorf("%w: %s partition %d: no standby copy", ErrRebalancing, spec.name, p)
	for _, ep := range a.standbyEndpoints(spec, p) {
		var es []StoreEntry
		if es, err = a.remoteRange(ctx, ep, spec.name, []int32{p}, from, to, limit, true); err == nil {
			return es, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, err
}

// storeCodecs are a store's key and value codecs, type-erased for the HTTP
// API and checked by the typed helpers.
type storeCodecs struct {
	key, value  any // Codec[K], Codec[V]
	parseKey    func(text string) ([]byte, error)
	decodeKey   func([]byte) (any, error)
	decodeValue func([]byte) (any, error)
	windowKind  string // a windowed store's ("time", "sliding", "session"; window_query.go)
}

func newStoreCodecs[K, V any](kc Codec[K], vc Codec[V]) *storeCodecs {
	return &storeCodecs{
		key: kc, value: vc,
		parseKey: func(text string) ([]byte, error) {
			var k K
			if s, ok := any(&k).(*string); ok {
				*s = text
			} else if err := json.Unmarshal([]byte(text), &k); err != nil {
				return nil, fmt.Errorf("key %q is not a JSON %T: %w", text, k, err)
			}
			return kc.Encode(k)
		},
		decodeKey:   func(b []byte) (any, error) { return kc.Decode(b) },
		decodeValue: func(b []byte) (any, error) { return vc.Decode(b) },
	}
}

// StoreQuery is a typed view of a store for queries: keys and values go
// through the store's own codecs.
type StoreQuery[K, V any] struct {
	app   *App
	name  string
	key   Codec[K]
	value Codec[V]
}

// Entry is a decoded store entry.
type Entry[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
}

// QueryStore returns a typed query handle on a store of app. K and V must
// be the store's key and value types (for Count: the grouped key type and
// int64); ErrUnknownStore or a type error otherwise.
func QueryStore[K, V any](app *App, store string) (*StoreQuery[K, V], error) {
	spec, ok := app.stores[store]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	if spec.codecs == nil {
		return nil, fmt.Errorf("stream: store %q has no codecs to query it with", store)
	}
	kc, ok := spec.codecs.key.(Codec[K])
	if !ok {
		return nil, fmt.Errorf("stream: store %q: keys are not of type %T", store, *new(K))
	}
	vc, ok := spec.codecs.value.(Codec[V])
	if !ok {
		return nil, fmt.Errorf("stream: store %q: values are not of type %T", store, *new(V))
	}
	return &StoreQuery[K, V]{app: app, name: store, key: kc, value: vc}, nil
}

// Get returns the value of key (found false if the store has none).
func (q *StoreQuery[K, V]) Get(ctx context.Context, key K, opts ...QueryOpt) (v V, found bool, err error) {
	kb, err := q.key.Encode(key)
	if err != nil {
		return v, false, fmt.Errorf("store %s: encode key: %w", q.name, err)
	}
	e, found, err := q.app.Get(ctx, q.name, kb, opts...)
	if err != nil || !found {
		return v, false, err
	}
	if v, err = q.value.Decode(e.Value); err != nil {
		return v, false, fmt.Errorf("store %s: decode value: %w", q.name, err)
	}
	return v, true, nil
}

// Range returns the entries with from <= key < to in the order of the
// encoded keys (for String, byte order; for Int64, numeric order of
// non-negative keys), at most limit (DefaultRangeLimit if <= 0).
func (q *StoreQuery[K, V]) Range(ctx context.Context, from, to K, limit int, opts ...QueryOpt) ([]Entry[K, V], error) {
	fb, err := q.key.Encode(from)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode key: %w", q.name, err)
	}
	tb, err := q.key.Encode(to)
	if err != nil {
		return nil, fmt.Errorf("store %s: encode key: %w", q.name, err)
	}
	return q.decode(q.app.Range(ctx, q.name, fb, tb, limit, opts...))
}

// All returns the store's entries in encoded-key order, at most limit
// (DefaultRangeLimit if <= 0).
func (q *StoreQuery[K, V]) All(ctx context.Context, limit int, opts ...QueryOpt) ([]Entry[K, V], error) {
	return q.decode(q.app.Range(ctx, q.name, nil, nil, limit, opts...))
}

func (q *StoreQuery[K, V]) decode(es []StoreEntry, err error) ([]Entry[K, V], error) {
	if err != nil {
		return nil, err
	}
	out := make([]Entry[K, V], len(es))
	for i, e := range es {
		k, err := q.key.Decode(e.Key)
		if err != nil {
			return nil, fmt.Errorf("store %s: decode key: %w", q.name, err)
		}
		v, err := q.value.Decode(e.Value)
		if err != nil {
			return nil, fmt.Errorf("store %s: decode value: %w", q.name, err)
		}
		out[i] = Entry[K, V]{Key: k, Value: v, Timestamp: e.Timestamp}
	}
	return out, nil
}

// KeyMetadata says where a key of a store lives (Kafka Streams'
// KeyQueryMetadata): for callers that route requests themselves.
type KeyMetadata struct {
	// Partition is the key's partition; -1 for a global table's store,
	// which every instance holds whole (Local, Active this instance).
	Partition int32
	// Local: this instance serves the partition (its task is restored).
	Local bool
	// Active is the query endpoint of the owning member ("" if it
	// advertises none, or for a local partition when this instance
	// advertises none).
	Active string
	// Standbys are the endpoints of the members keeping standby copies,
	// by this instance's StandbyReplicas setting (every instance of an App
	// is expected to use the same).
	Standbys []string
}

// KeyMetadata returns where an encoded key of store lives. Errors as Get's,
// except that a partition owned elsewhere without an endpoint is not an
// error (Active is "").
func (a *App) KeyMetadata(store string, key []byte) (KeyMetadata, error) {
	if a.isGlobalStore(store) {
		return KeyMetadata{Partition: -1, Local: true, Active: a.queryEndpoint()}, nil
	}
	spec, n, err := a.queryTarget(store)
	if err != nil {
		return KeyMetadata{}, err
	}
	md := KeyMetadata{Partition: storeKeyPartition(spec, key, n)}
	err = a.readLocal(spec, md.Partition, false, func(*state.DB, bool) error { return nil })
	if err != nil && !errors.Is(err, errNotLocal) {
		return md, err
	}
	md.Local = err == nil
	v := a.query.view.current()
	if v == nil {
		if md.Local {
			md.Active = a.queryEndpoint()
			return md, nil
		}
		return md, fmt.Errorf("%w: group view unknown", ErrRebalancing)
	}
	tp := a.storeInput(spec, md.Partition)
	m, ok := v.ownerOf(tp)
	switch {
	case md.Local:
		md.Active = a.queryEndpoint()
	case !ok || m.id == v.self:
		return md, fmt.Errorf("%w: %s partition %d is moving", ErrRebalancing, store, md.Partition)
	default:
		md.Active = m.info.QueryEndpoint
	}
	for _, id := range v.standbysOf(tp, a.cfg.standbyReplicas) {
		for _, vm := range v.members {
			if vm.id == id && vm.info.QueryEndpoint != "" {
				md.Standbys = append(md.Standbys, vm.info.QueryEndpoint)
			}
		}
	}
	return md, nil
}
