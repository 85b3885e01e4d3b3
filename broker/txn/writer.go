package txn

import "sync"

// write is one queued append of one batch; done runs on the loop after the
// append returned, in queue order.
type write struct {
	batch []byte
	done  func(err error)
}

// writer appends queued writes to the state log on its own goroutine,
// coalescing everything queued into one durable Append (one fsync), then
// hands the results to the loop in queue order. The queue is unbounded so
// the loop never blocks on I/O.
type writer struct {
	c      *Coordinator
	mu     sync.Mutex
	queue  []write
	signal chan struct{}
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once
}

func newWriter(c *Coordinator) *writer {
	return &writer{c: c, signal: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
}

// enqueue queues a write. Loop only (so queue order is loop order).
func (w *writer) enqueue(wr write) {
	w.mu.Lock()
	w.queue = append(w.queue, wr)
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *writer) run() {
	defer close(w.exited)
	for {
		select {
		case <-w.quit:
			return
		case <-w.signal:
		}
		w.mu.Lock()
		q := w.queue
		w.queue = nil
		w.mu.Unlock()
		if len(q) == 0 {
			continue
		}
		var buf []byte
		for _, wr := range q {
			buf = append(buf, wr.batch...)
		}
		_, err := w.c.opts.State.Append(buf, true)
		if err != nil {
			w.c.met.appendErrors.Inc()
			w.c.logger.Error("transaction state append failed", "batches", len(q), "err", err)
		}
		w.c.post(func() {
			for _, wr := range q {
				wr.done(err)
			}
		})
	}
}

func (w *writer) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.exited
}
