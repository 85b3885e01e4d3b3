package group

import "sync"

// store is the coordinator's view of the offsets partition.
type store interface {
	// append writes one or more concatenated batches and returns the
	// offset given to the first record; durable returns after fsync.
	append(batches []byte, durable bool) (base int64, err error)
	// read returns whole batches from offset up to upTo.
	read(offset int64, maxBytes int, upTo int64) (data []byte, release func(), err error)
	highWatermark() int64
	logStartOffset() int64
}

// write is one queued append. done runs on the loop after the append
// returned, in queue order.
type write struct {
	batch   []byte
	records int
	durable bool
	done    func(base int64, err error)
}

// writer appends queued writes to the offsets log on its own goroutine,
// coalescing everything queued into one Append (one fsync when any write
// needs durability), then hands the results to the loop in queue order.
// The queue is unbounded so the loop never blocks on I/O.
type writer struct {
	c      *Coordinator
	mu     sync.Mutex
	queue  []write
	signal chan struct{}
	quit   chan struct{}
	exited chan struct{}
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
			w.drain()
			return
		case <-w.signal:
		}
		for {
			w.mu.Lock()
			batch := w.queue
			w.queue = nil
			w.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			w.flush(batch)
		}
	}
}

func (w *writer) flush(ws []write) {
	var all []byte
	durable := false
	for _, wr := range ws {
		all = append(all, wr.batch...)
		durable = durable || wr.durable
	}
	base, err := w.c.store.append(all, durable)
	apply := func() {
		next := base
		for _, wr := range ws {
			if wr.done != nil {
				wr.done(next, err)
			}
			next += int64(wr.records)
		}
	}
	select {
	case w.c.events <- apply:
	case <-w.quit:
	}
}

// drain appends what is still queued at Close (group metadata, member
// records, commits whose requests already returned ErrClosed: appending
// an unacknowledged commit is harmless, the client retries it).
func (w *writer) drain() {
	w.mu.Lock()
	ws := w.queue
	w.queue = nil
	w.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	var all []byte
	durable := false
	for _, wr := range ws {
		all = append(all, wr.batch...)
		durable = durable || wr.durable
	}
	if _, err := w.c.store.append(all, durable); err != nil {
		w.c.logger.Warn("offsets log: writes queued at close not appended", "writes", len(ws), "err", err)
	}
}

// stop ends the writer after the loop has exited (Close), appending what
// is still queued.
func (w *writer) stop() {
	close(w.quit)
	<-w.exited
}
