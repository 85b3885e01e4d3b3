// Package ilog is the coalescing writer both coordinators use for the single
// partition of their internal topic (__consumer_offsets,
// __transaction_state): the coordinator's loop queues writes without ever
// blocking on I/O, and one goroutine appends everything queued so far in a
// single Append (so one fsync covers every durable write queued behind a
// slow one), then hands the results back to the loop in queue order.
//
// Guarantees:
//   - Writes are appended in Enqueue order, each write's bytes contiguous.
//   - A flush is durable (Append(..., true)) when any of its writes is.
//   - Done callbacks run through Options.Deliver (on the owner's loop), in
//     Enqueue order, after the Append that carried the write returned;
//     every write of one flush sees that flush's error.
//   - Write i's base offset is the flush's base plus the Records of the
//     writes before it in that flush.
//   - After Stop no flush starts; StopAndDrain appends what is still
//     queued (without Done callbacks).
package ilog

import "sync"

// Write is one queued append.
type Write struct {
	Batch   []byte // one or more whole RecordBatch v2 batches
	Records int    // records in Batch (to compute the next write's base offset)
	Durable bool   // the append must be fsynced before Done runs
	// Done, if not nil, gets the offset of the write's first record and
	// the append's error; it runs through Options.Deliver.
	Done func(base int64, err error)
}

// Options wires a Writer to its log and its owner.
type Options struct {
	// Append writes concatenated batches and returns the offset of the
	// first record; durable returns only after fsync.
	Append func(batches []byte, durable bool) (base int64, err error)
	// Deliver runs fn on the owner's loop. It is called on the writer's
	// goroutine and must return (dropping fn) once the owner is closing.
	Deliver func(fn func())
	// OnError, if not nil, is told about each failed flush (on the
	// writer's goroutine, before the results are delivered).
	OnError func(writes int, err error)
}

// Writer is a coalescing appender. Enqueue is safe for concurrent use but
// the owner calls it from its loop only, so queue order is loop order. Run
// runs on its own goroutine; Stop and StopAndDrain are called once the
// owner's loop has exited.
type Writer struct {
	opts   Options
	mu     sync.Mutex
	queue  []Write // guarded by mu
	signal chan struct{}
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once
}

// New returns a Writer; start it with go w.Run().
func New(opts Options) *Writer {
	return &Writer{opts: opts, signal: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
}

// Enqueue queues a write; it never blocks on I/O (the queue is unbounded).
func (w *Writer) Enqueue(wr Write) {
	w.mu.Lock()
	w.queue = append(w.queue, wr)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// Run flushes queued writes until Stop.
func (w *Writer) Run() {
	defer close(w.exited)
	for {
		select {
		case <-w.quit:
			return
		case <-w.signal:
		}
		for {
			select {
			case <-w.quit:
				return
			default:
			}
			ws := w.take()
			if len(ws) == 0 {
				break
			}
			w.flush(ws)
		}
	}
}

func (w *Writer) take() []Write {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.queue
	w.queue = nil
	return ws
}

// appendAll appends ws in one Append, durable if any write is.
func (w *Writer) appendAll(ws []Write) (int64, error) {
	var all []byte
	durable := false
	for _, wr := range ws {
		all = append(all, wr.Batch...)
		durable = durable || wr.Durable
	}
	return w.opts.Append(all, durable)
}

func (w *Writer) flush(ws []Write) {
	base, err := w.appendAll(ws)
	if err != nil && w.opts.OnError != nil {
		w.opts.OnError(len(ws), err)
	}
	w.opts.Deliver(func() {
		next := base
		for _, wr := range ws {
			if wr.Done != nil {
				wr.Done(next, err)
			}
			next += int64(wr.Records)
		}
	})
}

// Stop ends Run and waits for it; writes still queued are not appended.
// Safe to call more than once.
func (w *Writer) Stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.exited
}

// StopAndDrain ends Run, then appends what is still queued in one Append
// (durable if any write is) without running Done. It returns how many
// writes that was and the append's error.
func (w *Writer) StopAndDrain() (writes int, err error) {
	w.Stop()
	ws := w.take()
	if len(ws) == 0 {
		return 0, nil
	}
	_, err = w.appendAll(ws)
	return len(ws), err
}
