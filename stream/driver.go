package stream

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Driver runs a topology without a broker, deterministically, for unit tests
// (package streamtest wraps it with typed helpers). Records piped into source
// topics are processed by the same tasks, stores and operators an App runs;
// records written to any topic (outputs, repartition, changelog, dead-letter)
// are kept in memory, and repartition topics are fed back to their tasks.
//
// Partitioning is the App's: murmur2 of the encoded key modulo the topic's
// partition count (set with the partitions map; 1 if absent; internal topics
// derive theirs as the App would). Processing order is deterministic: Process
// repeatedly takes one record from every task with queued input, in task
// order (sub-topology, partition), until all are drained; a task reading
// several topics takes the queued record with the smallest timestamp (ties:
// a table's topic first, then by topic name), as an App orders a round.
//
// Time is virtual. Event time moves with the records piped: a task's
// watermark is the largest event time each of its input partitions delivered
// minus the Watermarks option's out-of-orderness bound, the minimum over its
// partitions (an input with no record yet holds it back, unless the idle
// timeout of Watermarks passed in processing time); every record is a round,
// so timers fire and windows close right after the record that moves the
// watermark past them. Processing time starts at the Unix epoch and moves
// only with AdvanceProcessingTime (and retry backoff sleeps, which advance
// it instead of waiting); ProcessingClock supplies another clock, which
// AdvanceProcessingTime then refuses to move. Tick ends a round for every
// task without new records, as an App does for tasks that polled nothing:
// processing-time timers fire, idle timeouts pass. EndOfInput moves every
// watermark to the end of time, as a bounded run ends. A Driver is not safe
// for concurrent use.
type Driver struct {
	a      *App
	clock  *instantClock
	parts  map[string]int32
	queues map[topicPartition][]*kgo.Record
	next   map[topicPartition]int64
	log    map[string][]*kgo.Record
	tasks  map[taskID]*task
}

// NewDriver builds a driver for b. opts are App options; Brokers is not
// needed. State lives under StateDir (set it to a test's temporary
// directory) and is removed by Close.
func NewDriver(appID string, b *Builder, partitions map[string]int32, opts ...Opt) (*Driver, error) {
	d := &Driver{parts: map[string]int32{}, queues: map[topicPartition][]*kgo.Record{},
		next: map[topicPartition]int64{}, log: map[string][]*kgo.Record{}, tasks: map[taskID]*task{}}
	d.clock = &instantClock{now: time.Unix(0, 0).UTC()}
	base := []Opt{Brokers("driver.invalid:0"), ProcessingClock(d.clock)}
	// The driver's log replaces the cluster; it keeps every record.
	logged := optFunc(func(c *config) { c.seams.producer = d.produce })
	a, err := NewApp(appID, b, slices.Concat(base, opts, []Opt{logged})...)
	if err != nil {
		return nil, err
	}
	d.a = a
	maps.Copy(d.parts, partitions)
	for _, s := range b.sources {
		if !s.internal && d.parts[s.topic] <= 0 {
			d.parts[s.topic] = 1
		}
	}
	if err := a.copartitionCheck(d.parts); err != nil {
		return nil, fmt.Errorf("stream driver: %w", err)
	}
	for _, s := range b.sources {
		if s.internal {
			d.parts[a.topicOf(s)] = a.repartitionCount(s, func(topic string) int32 { return d.parts[topic] })
		}
	}
	a.partitions = d.parts
	for _, st := range b.stores {
		if !st.table {
			d.parts[a.changelogTopic(st.name)] = a.taskCount(a.subs[a.subOf[st.source]])
		}
	}
	a.driverQueries(d.partitions, func(id taskID) error { _, err := d.task(id); return err })
	return d, nil
}

// instantClock advances on Sleep instead of waiting.
type instantClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *instantClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *instantClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (d *Driver) partitions(topic string) int32 {
	if n := d.parts[topic]; n > 0 {
		return n
	}
	return 1
}

// produce is the App's producer hook: it appends r to its topic's log and,
// for a source topic, queues it for its task.
func (d *Driver) produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	n := d.partitions(r.Topic)
	if r.Partition < 0 || r.Partition >= n {
		if r.Key == nil {
			r.Partition = 0
		} else {
			r.Partition = int32(kgo.StickyKeyPartitioner(nil).ForTopic(r.Topic).Partition(r, int(n)))
		}
	}
	tp := topicPartition{r.Topic, r.Partition}
	r.Offset = d.next[tp]
	d.next[tp]++
	d.log[r.Topic] = append(d.log[r.Topic], r)
	if _, err := d.a.driverApplyGlobal(r); err != nil {
		promise(r, err)
		return
	}
	if _, ok := d.a.sources[r.Topic]; ok {
		d.queues[tp] = append(d.queues[tp], r)
	}
	promise(r, nil)
}

// Pipe writes a record to a source topic, partitioned by key, and returns
// where it landed. It is processed by the next Process.
func (d *Driver) Pipe(topic string, key, value []byte, ts time.Time, headers ...Header) (Origin, error) {
	if _, ok := d.a.sources[topic]; !ok && !d.a.isGlobalTopic(topic) {
		return Origin{}, fmt.Errorf("stream driver: %s is not a source topic", topic)
	}
	r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: ts, Partition: -1}
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	d.produce(r, func(*kgo.Record, error) {})
	return Origin{Topic: topic, Partition: r.Partition, Offset: r.Offset}, nil
}

// Process handles every queued record, including those its processing writes
// to repartition topics, and returns the first runtime error (processing
// errors of user code go to the dead-letter topics, as in an App).
func (d *Driver) Process() error {
	ctx := context.Background()
	if err := d.a.driverLoadGlobals(d.log); err != nil {
		return err
	}
	for {
		// The head record of each task with queued input.
		heads := map[taskID]topicPartition{}
		for tp, q := range d.queues {
			id, _ := d.a.taskOf(tp.topic, tp.partition)
			cur, ok := heads[id]
			if !ok || d.before(q[0], d.queues[cur][0]) {
				heads[id] = tp
			}
		}
		if len(heads) == 0 && d.closesPending() {
			// A burst of window closes goes on in rounds without
			// records, as an App's loop runs them (window_burst.go).
			for _, id := range slices.SortedFunc(maps.Keys(d.tasks), compareTaskIDs) {
				if t := d.tasks[id]; t.closesPending() {
					if err := d.round(t); err != nil {
						return err
					}
				}
			}
			continue
		}
		if len(heads) == 0 {
			// Processed writes sit in the tasks' caches until a commit;
			// the Driver makes them readable (queries) once idle.
			for _, t := range d.tasks {
				if t.db != nil {
					if err := t.db.Flush(); err != nil {
						return err
					}
				}
			}
			return nil
		}
		for _, id := range slices.SortedFunc(maps.Keys(heads), compareTaskIDs) {
			tp := heads[id]
			// The task first (a new one restores its tables up to the
			// records still queued: not the one it is about to process).
			t, err := d.task(id)
			if err != nil {
				return err
			}
			q := d.queues[tp]
			r := q[0]
			if len(q) == 1 {
				delete(d.queues, tp)
			} else {
				d.queues[tp] = q[1:]
			}
			if err := t.handle(ctx, r); err != nil {
				return err
			}
			if err := d.round(t); err != nil {
				return err
			}
		}
	}
}

// closesPending reports whether a task left window closes for the next
// round.
func (d *Driver) closesPending() bool {
	for _, t := range d.tasks {
		if t.closesPending() {
			return true
		}
	}
	return false
}

// round ends a round of task t: its time-driven work, its store writes,
// its commit.
func (d *Driver) round(t *task) error {
	if err := t.endBatch(); err != nil {
		return err
	}
	if err := t.flushState(); err != nil {
		return err
	}
	return d.commit(t)
}

// commit stands for an at-least-once commit after every round: the
// Driver's log takes every record at once, so the task's input offsets are
// committed as soon as its round ends.
func (d *Driver) commit(t *task) error {
	for topic, n := range t.next {
		t.committed[topic] = n.Offset
	}
	t.notifyCommitted()
	return t.dropCommitted()
}

// ProcessingTime returns the App's processing clock.
func (d *Driver) ProcessingTime() time.Time { return d.a.cfg.clock.Now() }

// AdvanceProcessingTime moves the driver's processing clock forward by dt,
// then ends a round for every task (Tick): processing-time timers now due
// fire, inputs idle for the Watermarks idle timeout stop holding watermarks
// back. It fails if the App was given another clock (ProcessingClock) or dt
// is negative.
func (d *Driver) AdvanceProcessingTime(dt time.Duration) error {
	if dt < 0 {
		return fmt.Errorf("stream driver: processing time cannot go back (%v)", dt)
	}
	if d.a.cfg.clock != Clock(d.clock) {
		return fmt.Errorf("stream driver: the App runs on its own ProcessingClock; move that clock and call Tick")
	}
	if err := d.Process(); err != nil {
		return err
	}
	d.clock.mu.Lock()
	d.clock.now = d.clock.now.Add(dt)
	d.clock.mu.Unlock()
	return d.Tick()
}

// Tick processes what is queued, then ends a round for every task of the
// topology (creating and restoring the tasks not started yet, as an App
// does for the tasks assigned to it) without new records, in task order:
// the watermark advances on the processing clock, timers fire, expired keys
// go; then what those rounds wrote to repartition topics is processed.
func (d *Driver) Tick() error {
	if err := d.Process(); err != nil {
		return err
	}
	for _, st := range d.a.subs {
		for p := int32(0); p < d.a.taskCount(st); p++ {
			t, err := d.task(taskID{st.idx, p})
			if err != nil {
				return err
			}
			if err := d.round(t); err != nil {
				return err
			}
		}
	}
	return d.Process()
}

// EndOfInput ends the input as a bounded run does at the end of its
// records (App.RunBounded): what is queued is processed, then every task's
// watermark moves to the end of time — every window closes, every
// event-time timer fires — and what that writes to repartition topics is
// processed at the end of time too. Records piped afterwards are processed
// with the watermark at the end of time (late for every window).
func (d *Driver) EndOfInput() error {
	if err := d.Process(); err != nil {
		return err
	}
	// One sub-topology at a time, in topological order: a downstream
	// task reaches the end of time after everything its upstream wrote
	// at its own end (see App.RunBounded).
	d.a.bounded = &boundedRun{}
	for range d.a.subs {
		d.a.bounded.level++
		if err := d.Tick(); err != nil { // Process ends a burst of window closes
			return err
		}
	}
	return nil
}

// before orders two queued records of one task as mergeByTimestamp does.
func (d *Driver) before(x, y *kgo.Record) bool {
	if !x.Timestamp.Equal(y.Timestamp) {
		return x.Timestamp.Before(y.Timestamp)
	}
	if tx, ty := d.a.tableFirst(x.Topic), d.a.tableFirst(y.Topic); tx != ty {
		return tx
	}
	return x.Topic < y.Topic
}

func (d *Driver) task(id taskID) (*task, error) {
	if t, ok := d.tasks[id]; ok {
		return t, nil
	}
	t, err := d.a.newTask(id)
	if err != nil {
		return nil, err
	}
	if err := d.restore(t); err != nil {
		t.close()
		return nil, err
	}
	d.a.taskQueryable(t)
	d.tasks[id] = t
	return t, nil
}

// restore rebuilds a new task's stores from the changelog records written
// so far (none on a first start), as an App does on assignment without a
// local copy. A table is restored from its source topic's records the
// driver already handed to the task (up to the consumed position, as an App
// restores up to the committed offset); the rest are still queued.
func (d *Driver) restore(t *task) error {
	if t.db == nil {
		return nil
	}
	if err := t.db.Wipe(); err != nil {
		return err
	}
	txn := t.db.Begin()
	defer txn.Discard()
	for _, s := range t.stores {
		tp := topicPartition{s.changelog, t.id.partition}
		consumed := d.next[tp] - int64(len(d.queues[tp]))
		for _, r := range d.log[s.changelog] {
			if r.Partition != t.id.partition || (s.spec.table && (r.Offset >= consumed || !s.spec.accepts(r))) {
				continue
			}
			if err := applyStoreChangelog(txn, s.spec, r); err != nil {
				return err
			}
		}
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	for _, s := range t.stores {
		ts, ok, err := t.db.MaxTS(s.spec.name)
		if err != nil {
			return err
		}
		if ok && ts > t.streamTime {
			t.streamTime = ts
		}
	}
	return nil
}

// Restart closes every task and drops its local stores, as a crash that
// also loses the disk would; tasks are re-created on the next Process and
// restore their stores from the changelog records written so far. Outputs
// are unaffected. Use it to check that a topology's state survives a
// restore.
func (d *Driver) Restart() error {
	err := d.Close()
	for _, st := range d.a.subs {
		for p := int32(0); p < d.a.taskCount(st); p++ {
			if rerr := os.RemoveAll(d.a.taskDir(taskID{st.idx, p})); rerr != nil && err == nil {
				err = rerr
			}
		}
	}
	return err
}

// Records returns every record written to topic so far, in write order, as
// raw bytes; Origin is where the record itself landed.
func (d *Driver) Records(topic string) []Record[[]byte, []byte] {
	out := make([]Record[[]byte, []byte], 0, len(d.log[topic]))
	for _, r := range d.log[topic] {
		rec := Record[[]byte, []byte]{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
			Origin: Origin{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, rec)
	}
	return out
}

// Topics lists the topics written so far, sorted.
func (d *Driver) Topics() []string { return slices.Sorted(maps.Keys(d.log)) }

// App returns the App the driver runs (for Guarantees and Describe).
func (d *Driver) App() *App { return d.a }

// Close closes the tasks' local stores.
func (d *Driver) Close() error {
	var first error
	for _, t := range d.tasks {
		d.a.taskUnqueryable(t)
		if err := t.close(); err != nil && first == nil {
			first = err
		}
	}
	d.tasks = map[taskID]*task{}
	if err := d.a.closeGlobals(); err != nil && first == nil {
		first = err
	}
	return first
}
