package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/internal/ilog"
	"github.com/weirhq/weir/broker/internal/kapi"
	"github.com/weirhq/weir/broker/internal/ownerloop"
)

// Coordinator is the transaction coordinator. Its exported methods are
// safe for concurrent use; all state is owned by one goroutine (the loop).
type Coordinator struct {
	opts   Options
	logger *slog.Logger
	met    *metrics

	loop *ownerloop.Loop // owns the state below
	w    *ilog.Writer

	// markerCtx is the context of marker writes; cancelled by Close.
	markerCtx    context.Context
	markerCancel context.CancelFunc
	markerWG     sync.WaitGroup
	markerSem    chan struct{} // bounds concurrent marker writes

	// Loop-owned state.
	txns        map[string]*txnMeta
	markerTxns  map[string]*txnMeta // txns with a marker job
	pidNext     int64               // next producer id to hand out
	pidEnd      int64               // end (exclusive) of the reserved block
	pidWaiters  []func(int64, error)
	pidWriting  bool
	nextPeriod  time.Time // next timeout/expiration scan
	stateCounts map[txnState]int
}

// NewCoordinator replays the state partition and returns a running
// coordinator. Transactions found in PrepareCommit/PrepareAbort get their
// markers (re)written; Ongoing ones are aborted when they time out.
func NewCoordinator(opts Options) (*Coordinator, error) {
	if opts.State == nil {
		return nil, errors.New("txn: Options.State is required")
	}
	if opts.Partitions == nil {
		return nil, errors.New("txn: Options.Partitions is required")
	}
	opts.ensureDefaults()
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		opts:        opts,
		logger:      opts.Logger,
		met:         met,
		markerSem:   make(chan struct{}, 64),
		txns:        make(map[string]*txnMeta),
		markerTxns:  make(map[string]*txnMeta),
		stateCounts: make(map[txnState]int),
	}
	start := time.Now()
	n, err := c.replay()
	if err != nil {
		met.unregister()
		return nil, fmt.Errorf("txn: replay %s: %w", StateTopic, err)
	}
	for _, m := range c.txns {
		c.countState(m.state, 1)
	}
	c.logger.Info("transaction state replayed", "records", n, "transactional_ids", len(c.txns),
		"next_producer_id", c.pidNext, "took", time.Since(start))
	c.markerCtx, c.markerCancel = context.WithCancel(context.Background())
	// Every write is durable; results are handed to the loop (dropped once
	// Close began, as post does).
	c.w = ilog.New(ilog.Options{
		Append:  c.opts.State.Append,
		Deliver: func(fn func()) { c.post(fn) },
		OnError: func(writes int, err error) {
			c.met.appendErrors.Inc()
			c.logger.Error("transaction state append failed", "batches", writes, "err", err)
		},
	})
	c.nextPeriod = opts.Now().Add(opts.AbortTimedOutInterval)
	c.loop = ownerloop.Start(ownerloop.Options{
		Now:  opts.Now,
		Fire: func(_ time.Time, force bool) { c.tick(force) },
		Next: c.timerDeadline,
	})
	// Recovery, on the loop (marker writes report back to it): a prepared
	// transaction completes (markers are idempotent, so the partitions
	// that already have theirs get a harmless second).
	_ = c.do(context.Background(), func() {
		for _, m := range c.txns {
			if m.state.isPrepare() {
				c.logger.Info("completing prepared transaction", "transactional_id", m.id, "state", m.state.String(),
					"producer_id", m.producerID, "epoch", m.epoch, "partitions", len(m.parts))
				c.beginMarkers(m)
			}
		}
	})
	go c.w.Run()
	return c, nil
}

// replay loads the state log into memory. It runs before the loop starts.
func (c *Coordinator) replay() (int, error) {
	log := c.opts.State
	off := log.LogStartOffset()
	hw := log.HighWatermark()
	n := 0
	for off < hw {
		data, release, err := log.Read(off, 1<<20, hw)
		if err != nil {
			return n, fmt.Errorf("read at %d: %w", off, err)
		}
		next, _, err := forEachRecord(data, func(_ int64, key, value []byte) error {
			rec, ok, err := decodeRecord(key, value)
			if err != nil {
				return err
			}
			n++
			if !ok {
				c.logger.Warn("skipping unknown transaction state record", "key_bytes", len(key))
				return nil
			}
			c.applyRecord(rec)
			return nil
		})
		if release != nil {
			release()
		}
		if err != nil {
			return n, err
		}
		if next <= off {
			return n, fmt.Errorf("%w: no whole batch at offset %d", ErrCorruptState, off)
		}
		off = next
	}
	return n, nil
}

func (c *Coordinator) applyRecord(rec stateRecord) {
	switch {
	case rec.pidBlockEnd > 0:
		if rec.pidBlockEnd > c.pidEnd {
			c.pidEnd = rec.pidBlockEnd
		}
		// Ids below a persisted end may have been handed out before the
		// crash; never reuse them.
		c.pidNext = c.pidEnd
	case rec.tombstone:
		delete(c.txns, rec.txnID)
	default:
		if rec.data.state == stateDead {
			delete(c.txns, rec.txnID)
			return
		}
		m := c.txns[rec.txnID]
		if m == nil {
			m = &txnMeta{id: rec.txnID}
			c.txns[rec.txnID] = m
		}
		m.txnData = rec.data
		// A transactional id's producer ids come from a block; make sure
		// a block lost to truncation cannot hand them out again.
		for _, id := range []int64{rec.data.producerID, rec.data.nextProducerID, rec.data.prevProducerID} {
			if id >= c.pidNext && id < math.MaxInt64 {
				c.pidNext = id + 1
				c.pidEnd = max(c.pidEnd, c.pidNext)
			}
		}
	}
}

// timerDeadline is when the loop's real timer wakes it: the next periodic
// scan or the earliest marker retry, and at least every
// AbortTimedOutInterval.
func (c *Coordinator) timerDeadline() time.Time {
	now := c.opts.Now()
	next := c.nextPeriod
	for _, m := range c.markerTxns {
		if at := m.markers.nextRetry(); !at.IsZero() && at.Before(next) {
			next = at
		}
	}
	if limit := now.Add(c.opts.AbortTimedOutInterval); limit.Before(next) {
		return limit
	}
	return next
}

// Tick runs the periodic work now, as of Options.Now: aborts timed-out
// transactions, expires idle transactional ids and retries failed marker
// writes whose backoff passed. The coordinator's own timer calls it too;
// tests with a fake clock advance the clock and call Tick.
func (c *Coordinator) Tick() { c.loop.Tick() }

// tick is the loop's periodic work; force skips the scan interval.
func (c *Coordinator) tick(force bool) {
	now := c.opts.Now()
	if force || !now.Before(c.nextPeriod) {
		c.abortTimedOut(now)
		c.expireIDs(now)
		c.nextPeriod = now.Add(c.opts.AbortTimedOutInterval)
	}
	for _, m := range c.markerTxns {
		c.driveMarkers(m)
	}
}

// post hands fn to the loop without waiting. It returns false (fn never
// runs) if the coordinator closed. Never call it from the loop.
func (c *Coordinator) post(fn func()) bool { return c.loop.Post(fn) }

// do runs fn on the loop and waits for it to have run; ctx bounds only the
// hand-over (see ownerloop.Loop.Do).
func (c *Coordinator) do(ctx context.Context, fn func()) error {
	return closedErr(c.loop.Do(ctx, fn))
}

// call runs fn on the loop and waits for the response it passes to reply
// (possibly later, from another event).
func (c *Coordinator) call(ctx context.Context, fn func(reply func(kmsg.Response))) (kmsg.Response, error) {
	r, err := ownerloop.Call(ctx, c.loop, fn)
	return r, closedErr(err)
}

// stopping is closed when Close begins.
func (c *Coordinator) stopping() <-chan struct{} { return c.loop.Stopping() }

// closedErr is ErrClosed for a stopped loop, err otherwise.
func closedErr(err error) error {
	if errors.Is(err, ownerloop.ErrStopped) {
		return ErrClosed
	}
	return err
}

// apis are the requests Handle serves, each registered (regAPI) next to
// its handler, at the versions the handler implements:
// init_producer_id.go, add_partitions.go, end_txn.go, offsets.go,
// describe.go, write_txn_markers.go.
var apis kapi.Table[*Coordinator]

// regAPI registers h as the handler of key for versions min..max. Init
// functions only.
func regAPI[R kmsg.Request](key kmsg.Key, min, max int16, h func(*Coordinator, context.Context, R) (kmsg.Response, error)) {
	kapi.Register(&apis, key, min, max, h)
}

// APIVersions are the request keys and version ranges Handle serves,
// sorted by key, for the broker's ApiVersions response.
func APIVersions() []kmsg.ApiVersionsResponseApiKey { return apis.Versions() }

// Handle answers one transaction-related request: FindCoordinator,
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// TxnOffsetCommit, DescribeTransactions, ListTransactions and
// WriteTxnMarkers (KIP-664 abort of a hanging transaction). It blocks
// until the state change the response depends on is durable. A request of
// another key, or of a version outside its registered range, is an error
// (the broker closes the connection).
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	h, err := apis.Lookup(req)
	if err != nil {
		return nil, fmt.Errorf("txn: %w", err)
	}
	resp, err := h(c, ctx, req)
	if err != nil {
		return nil, err
	}
	downgradeFenced(req, resp)
	return resp, nil
}

// onLoop adapts a handler that runs on the loop and answers through
// reply (possibly from a later event) to a registered API handler.
func onLoop[R kmsg.Request](h func(c *Coordinator, req R, reply func(kmsg.Response))) func(*Coordinator, context.Context, R) (kmsg.Response, error) {
	return func(c *Coordinator, ctx context.Context, req R) (kmsg.Response, error) {
		return c.call(ctx, func(reply func(kmsg.Response)) { h(c, req, reply) })
	}
}

// downgradeFenced answers INVALID_PRODUCER_EPOCH where the request version
// predates PRODUCER_FENCED (KIP-588), as Kafka does: clients of those
// versions (kafkajs, older librdkafka and Java) do not know code 90 and
// would fail with an unknown error instead of treating the producer as
// fenced. The versions are Kafka's: InitProducerId < 4, AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn < 2.
func downgradeFenced(req kmsg.Request, resp kmsg.Response) {
	fenced, old := kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code
	fix := func(code *int16) {
		if *code == fenced {
			*code = old
		}
	}
	v := req.GetVersion()
	switch r := resp.(type) {
	case *kmsg.InitProducerIDResponse:
		if v < 4 {
			fix(&r.ErrorCode)
		}
	case *kmsg.AddPartitionsToTxnResponse:
		if v < 2 {
			for i := range r.Topics {
				for j := range r.Topics[i].Partitions {
					fix(&r.Topics[i].Partitions[j].ErrorCode)
				}
			}
		}
	case *kmsg.AddOffsetsToTxnResponse:
		if v < 2 {
			fix(&r.ErrorCode)
		}
	case *kmsg.EndTxnResponse:
		if v < 2 {
			fix(&r.ErrorCode)
		}
	}
}

// Close stops the coordinator: requests waiting on it get ErrClosed,
// marker writes in flight are cancelled (they are re-sent on the next
// start, from the durable PrepareCommit/PrepareAbort state).
func (c *Coordinator) Close() error {
	if c.loop.Stop() {
		c.markerCancel()
		c.w.Stop()
		c.markerWG.Wait()
		c.met.unregister()
	}
	return nil
}

// codeFor maps a state append error to the response code.
func codeFor(err error) int16 {
	if errors.Is(err, ErrClosed) {
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}
