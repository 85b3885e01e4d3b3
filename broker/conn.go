package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/broker/authz"
)

// Framing (Kafka wire protocol):
//
//	request:  int32 size | int16 api key | int16 version | int32 correlation id
//	          | nullable string client id | [tagged fields if flexible] | body
//	response: int32 size | int32 correlation id
//	          | [tagged fields if flexible, never for ApiVersions] | body
//
// A frame whose size is negative, larger than MaxRequestBytes or too short
// for a header, a header or body that does not decode, an unknown API key or
// an unsupported version (ApiVersions excepted) closes the connection, as
// Kafka does: the protocol has no way to answer them.

// minRequestHeader is api key + version + correlation id + client id length.
const minRequestHeader = 2 + 2 + 4 + 2

// errCloseConn is returned by a handler that wants the connection closed
// after the responses before it have been written (Kafka does this for
// requests it cannot answer).
var errCloseConn = errors.New("close connection")

// conn is one client connection. The read loop (serve) decodes requests in
// order and hands each to its own goroutine; the write loop writes the
// responses in request order. Requests queue in inflight, whose capacity
// bounds the work one connection can have outstanding.
type conn struct {
	b      *Broker
	nc     net.Conn
	logger *slog.Logger

	// ctx ends when the connection stops reading or the broker closes;
	// handlers that wait (long-poll fetch, JoinGroup) return early on it.
	// A durable produce is not cut short: it returns when its fsync does.
	ctx    context.Context
	cancel context.CancelFunc

	inflight chan *slot
	host     string // the peer's address as Kafka reports client hosts
	stopOnce sync.Once
	stopping atomic.Bool  // set by stopReading before it moves the read deadline
	pending  atomic.Int32 // requests read and not yet answered (idle check)
	// chains holds the last link per object of the APIs that order
	// their requests within a connection (api.order, order.go); a prune
	// of finished links is due past chainsPruneAt. Read loop only.
	chains        map[chainKey]chan struct{}
	chainsPruneAt int
	// frameSlots bounds the pooled frames this connection holds (see
	// framepool.go): the read loop takes a slot before it reads a pooled
	// frame, and the frame's return to the pool gives it back.
	frameSlots chan struct{}
	// mutedUntil (unix ns) is when the throttle time of the last
	// throttled response ends; reading waits for it (quota_enforce.go).
	mutedUntil atomic.Int64
	// principal is the authenticated principal in Kafka's form,
	// "User:<name>" (anonymous: "User:ANONYMOUS"). Set from the client
	// certificate before the read loop starts (SSL) or by the SASL
	// exchange before any request but ApiVersions is dispatched (SASL
	// listeners), and never changed afterwards, so handlers read it
	// without a lock; authorization and quotas use it (authz.go).
	principal string

	// lis is the listener the connection came in on (nil for connections
	// made in tests: the first listener's advertised address applies).
	lis *listener
	// sasl is the SASL state on SASL listeners (sasl.go); nil elsewhere.
	sasl *saslConn
	// tlsSmall gathers a vectored response's small buffers into one TLS
	// record (tls.go). Write loop only.
	tlsSmall []byte
	// wire is the TCP connection under TLS (tls.go), corked by the write
	// loop around each response; nil without TLS.
	wire *tlsWire
}

// slot is one request awaiting its response.
type slot struct {
	api     *api
	corr    int32
	done    chan struct{} // closed when resp/err are set
	resp    kmsg.Response // nil: no response (acks=0 produce)
	err     error         // non-nil: close the connection at this slot
	release []func()      // called after the response is written (fetch buffers)
	// frameDone returns the request's pooled frame (nil if not pooled).
	// Idempotent. The handler may call it as soon as it no longer reads
	// the request (Produce: once appended); the write loop calls it after
	// the response in any case.
	frameDone func()
	// clientID and host identify the requester (DescribeGroups shows
	// them per member, as Kafka does).
	clientID, host string
	// principal is the connection's principal when the request was read
	// (authz.go); authorization and quotas use it.
	principal string
	// conn is the requester's connection (its listener and principal).
	conn *conn
	// rawToken: the response is raw, a SASL token without header (the
	// SaslHandshake v0 flow, sasl.go); resp is nil.
	rawToken bool
	raw      []byte
}

func newConn(b *Broker, nc net.Conn) *conn {
	c := &conn{
		b:        b,
		nc:       nc,
		logger:   b.logger.With("remote", nc.RemoteAddr().String()),
		inflight: make(chan *slot, b.cfg.MaxInFlightPerConn),

		principal: authz.Anonymous,
	}
	// Kafka reports a client's host as "/<ip>".
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		c.host = "/" + host
	}
	c.ctx, c.cancel = context.WithCancel(b.ctx)
	c.chains = map[chainKey]chan struct{}{}
	c.frameSlots = make(chan struct{}, maxPooledFramesPerConn)
	return c
}

// stopReading makes the read loop return (used by Broker.Close); requests
// already read are still answered. Responses still owed are written within
// shutdownWriteTimeout, so a client that stopped reading cannot hold up
// Close.
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		c.stopping.Store(true)
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
		_ = c.nc.SetWriteDeadline(time.Now().Add(shutdownWriteTimeout))
	})
}

const shutdownWriteTimeout = 5 * time.Second

// setReadDeadline sets the read deadline unless the connection is being
// stopped (then the deadline stays in the past). Read loop only. A stop
// racing with this call sets stopping before its own deadline, so the
// re-check restores the past deadline if ours overwrote it.
func (c *conn) setReadDeadline(t time.Time) {
	if c.stopping.Load() {
		return
	}
	_ = c.nc.SetReadDeadline(t)
	if c.stopping.Load() {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// serve runs the connection until the client goes away, a request cannot be
// answered, or the broker closes. It returns after every goroutine it
// started has finished and the socket is closed.
func (c *conn) serve() {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	c.readLoop()
	// Nothing more will be read: long polls of this connection end now.
	c.cancel()
	close(c.inflight)
	<-writerDone
	c.cancel()
	c.nc.Close()
}

func (c *conn) readLoop() {
	var sizeBuf [4]byte
	idle := c.b.cfg.ConnectionsMaxIdle
	for {
		if idle > 0 {
			c.setReadDeadline(time.Now().Add(idle))
		}
		if _, err := io.ReadFull(c.nc, sizeBuf[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !c.stopping.Load() {
				if c.pending.Load() > 0 {
					continue // waiting on our own answers is not idle
				}
				c.logger.Debug("closing idle connection", "idle", idle)
				return
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, context.Canceled) {
				c.logger.Debug("read failed", "err", err)
			}
			return
		}
		if idle > 0 {
			c.setReadDeadline(time.Time{}) // a request is arriving: not idle
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if c.sasl != nil && c.sasl.raw { // unframed SASL tokens (sasl.go)
			if !c.saslRawToken(size) {
				return
			}
			continue
		}
		maxSize := c.b.cfg.MaxRequestBytes
		if c.sasl != nil && !c.sasl.authenticated {
			maxSize = min(maxSize, saslMaxReceive) // sasl.go
		}
		if size < minRequestHeader || size > maxSize {
			c.logger.Warn("closing connection: bad request size", "size", size, "max", maxSize)
			c.b.metrics.badFrames.Inc()
			return
		}
		// Decoded requests alias the frame (record batches are appended
		// straight from it), so it lives until the handler is done.
		// Frames of APIs registered with pooledFrame (Produce) are
		// recycled after the request (framePool); the others are
		// allocated per request, because handlers such as JoinGroup may
		// keep slices of them.
		frame, pooled, err := c.readFrame(int(size))
		if err != nil {
			c.logger.Debug("truncated request", "err", err)
			return
		}
		c.b.metrics.bytesIn.Add(float64(size) + 4)
		c.waitUnmuted() // quota_enforce.go: a throttled client's next request waits
		s, req, ok := c.decode(frame)
		if pooled != nil {
			if s == nil || !ok {
				c.putFrame(pooled)
			} else {
				s.frameDone = sync.OnceFunc(func() { c.putFrame(pooled) })
				s.onWritten(s.frameDone)
			}
		}
		if s == nil {
			c.b.metrics.badFrames.Inc()
			return
		}
		if ok && c.sasl != nil {
			if handled, keep := c.saslGate(s, req); handled || !keep {
				if s.frameDone != nil {
					s.frameDone() // s is not dispatched: its frame is done
				}
				if !keep {
					return
				}
				continue
			}
		}
		if !ok { // answered without a handler (ApiVersions downgrade)
			if !c.enqueue(s) {
				return
			}
			continue
		}
		if !c.dispatch(s, req) {
			return
		}
	}
}

// readFrame reads the body of a frame of size bytes. A frame of at least
// pooledFrameMin bytes of an API registered with pooledFrame comes from
// the broker's frame pool and is returned as pooled too (the caller puts
// it back when the request is done); the API key is peeked to tell.
func (c *conn) readFrame(size int) (frame []byte, pooled *[]byte, err error) {
	if size > readBudgetMin {
		// Reading stops while the broker's read budget is spent.
		if !c.b.reading.acquire(c.ctx, int64(size)) {
			return nil, nil, c.ctx.Err()
		}
		defer c.b.reading.release(int64(size))
	}
	if size < pooledFrameMin || size > pooledFrameMax {
		frame, err = readFrame(c.nc, size)
		if err != nil && size > readBudgetMin {
			c.b.reading.wasted(int64(size))
		}
		return frame, nil, err
	}
	var key [2]byte
	if _, err := io.ReadFull(c.nc, key[:]); err != nil {
		return nil, nil, err
	}
	a := lookupAPI(int16(binary.BigEndian.Uint16(key[:])))
	if a != nil && a.pooledFrame && c.takeFrameSlot() {
		pooled = c.b.frames.get(size)
		frame = (*pooled)[:size]
	} else {
		frame = make([]byte, size)
	}
	copy(frame, key[:])
	if _, err := io.ReadFull(c.nc, frame[2:]); err != nil {
		if pooled != nil {
			c.putFrame(pooled)
		}
		return nil, nil, err
	}
	return frame, pooled, nil
}

// frameSlotWait bounds how long the read loop waits for a frame slot
// before it reads the request into a buffer of its own. Held frames come
// back within an append (milliseconds); the bound is for a request that
// holds its frame longer (a transactional Produce whose verification the
// coordinator retries for up to verifyRetryFor), so that it does not hold
// up the other requests of the connection.
const frameSlotWait = 50 * time.Millisecond

// takeFrameSlot waits until this connection holds fewer than
// maxPooledFramesPerConn pooled frames and takes a slot, or returns false
// after frameSlotWait or when the connection ends (the caller then
// allocates the frame). A held frame comes back once its request is
// appended, or at the latest once its response is written or dropped,
// neither of which needs the read loop. Read loop only.
func (c *conn) takeFrameSlot() bool {
	select {
	case c.frameSlots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(frameSlotWait)
	defer t.Stop()
	select {
	case c.frameSlots <- struct{}{}:
		return true
	case <-t.C:
		c.b.frames.slotTimeouts.Add(1)
		return false
	case <-c.ctx.Done():
		return false
	}
}

// putFrame returns a pooled frame read by this connection and its slot.
// Once per frame.
func (c *conn) putFrame(b *[]byte) {
	c.b.frames.put(b)
	<-c.frameSlots
}

// readFrame reads size bytes. Large frames are read in growing chunks, so
// memory follows the bytes actually received: a client announcing 100 MiB
// and sending nothing holds 1 MiB, not 100.
func readFrame(r io.Reader, size int) ([]byte, error) {
	const chunk = 1 << 20
	if size <= chunk {
		buf := make([]byte, size)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf := make([]byte, 0, chunk)
	for len(buf) < size {
		n := min(size-len(buf), max(chunk, len(buf)))
		buf = slices.Grow(buf, n)
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+n])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// decode parses one frame. It returns a nil slot if the connection must be
// closed; ok false with a finished slot if the request was answered during
// decoding.
func (c *conn) decode(frame []byte) (s *slot, req kmsg.Request, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.b.panics.Add(1)
			c.logger.Error("panic decoding request", "panic", r, "stack", string(debug.Stack()))
			s, req, ok = nil, nil, false
		}
	}()
	rd := kbin.Reader{Src: frame}
	key := rd.Int16()
	version := rd.Int16()
	corr := rd.Int32()
	clientID := rd.NullableString()
	if !rd.Ok() {
		c.logger.Warn("closing connection: malformed request header")
		return nil, nil, false
	}
	api := lookupAPI(key)
	if api == nil {
		c.logger.Warn("closing connection: unsupported api key", "key", key)
		return nil, nil, false
	}
	if version < api.min || version > api.max {
		if api.unsupportedVersion != nil {
			return c.finished(api, corr, api.unsupportedVersion(c.b)), nil, false
		}
		c.logger.Warn("closing connection: unsupported api version", "key", key, "api", kmsg.NameForKey(key), "version", version)
		return nil, nil, false
	}
	req = kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&rd)
		if !rd.Ok() {
			c.logger.Warn("closing connection: malformed request header tags")
			return nil, nil, false
		}
	}
	if err := req.ReadFrom(rd.Src); err != nil {
		c.logger.Warn("closing connection: malformed request", "api", kmsg.NameForKey(key), "version", version, "err", err)
		return nil, nil, false
	}
	s = &slot{api: api, corr: corr, done: make(chan struct{}), host: c.host, conn: c}
	if clientID != nil {
		s.clientID = *clientID
	}
	return s, req, true
}

func (c *conn) finished(a *api, corr int32, resp kmsg.Response) *slot {
	s := &slot{api: a, corr: corr, done: make(chan struct{}), resp: resp}
	close(s.done)
	return s
}

// enqueue hands a slot to the write loop, waiting while the connection has
// MaxInFlightPerConn requests outstanding.
func (c *conn) enqueue(s *slot) bool {
	c.pending.Add(1)
	select {
	case c.inflight <- s:
		return true
	case <-c.ctx.Done():
		c.pending.Add(-1)
		return false
	}
}

// dispatch queues the slot and starts its handler goroutine. If the API
// orders its requests within a connection, its order function links the
// request first (on the read loop, which sees requests in order).
func (c *conn) dispatch(s *slot, req kmsg.Request) (ok bool) {
	if !c.enqueue(s) {
		return false
	}
	api := s.api
	c.b.metrics.requests.WithLabelValues(api.name).Inc()
	start := time.Now()
	call := func(ctx context.Context) (kmsg.Response, error) { return api.handle(c.b, ctx, s, req) }
	// authz.go: may remove refused items from req, before order links them.
	authorized, refused := c.authorize(s, req)
	if api.order != nil && !refused {
		defer func() {
			if r := recover(); r != nil { // never take the broker down
				c.b.panics.Add(1)
				c.logger.Error("panic ordering request", "api", api.name, "panic", r, "stack", string(debug.Stack()))
				s.err = errCloseConn
				close(s.done)
				ok = true // the writer closes the connection at this slot
			}
		}()
		call = api.order(c, s, req, call)
	}
	call = authorized(call)
	go func() {
		defer close(s.done)
		defer func() {
			if r := recover(); r != nil {
				c.b.panics.Add(1)
				c.logger.Error("panic handling request", "api", api.name, "panic", r, "stack", string(debug.Stack()))
				s.resp, s.err = nil, errCloseConn
			}
			c.b.metrics.latency.WithLabelValues(api.name).Observe(time.Since(start).Seconds())
		}()
		s.resp, s.err = call(c.ctx)
		if s.err == nil {
			c.chargeQuota(c.ctx, s, req, s.resp, start) // quota_enforce.go
		}
	}()
	return true
}

// onWritten registers f to run once the response of this request has been
// written (or dropped). Fetch uses it to release the pooled log buffers
// its response references. Only the request's handler may call it.
func (s *slot) onWritten(f func()) { s.release = append(s.release, f) }

func (c *conn) writeLoop() {
	var (
		buf    []byte
		broken bool // the socket failed or a handler asked to close: drain only
		sw     = newSpliceWriter()
	)
	for s := range c.inflight {
		<-s.done
		if !broken {
			switch {
			case s.err != nil:
				if !errors.Is(s.err, errCloseConn) {
					c.logger.Warn("closing connection", "api", s.api.name, "err", s.err)
				}
				broken = true
			case s.resp != nil || s.rawToken:
				var (
					n   int64
					err error
				)
				buf, n, err = c.writeResponse(buf, sw, s)
				if err != nil {
					c.logger.Debug("write failed", "err", err)
					broken = true
				} else {
					c.b.metrics.bytesOut.Add(float64(n))
				}
				if cap(buf) > 1<<20 {
					buf = nil // do not pin a large fetch buffer per idle connection
				}
			}
			if broken {
				// Stop the read loop and every handler of this connection.
				c.cancel()
				c.stopping.Store(true)
				_ = c.nc.SetReadDeadline(time.Unix(1, 0))
			}
		}
		for _, f := range s.release {
			f()
		}
		s.release = nil
		c.pending.Add(-1)
	}
}

// writeResponse writes the response of s: via writev without copying its
// large fields if its API registered a vectored write (Fetch's record
// sets, splice.go), else encoded into buf. It returns buf for reuse.
func (c *conn) writeResponse(buf []byte, sw *spliceWriter, s *slot) ([]byte, int64, error) {
	if c.wire == nil {
		return c.writeResponseTo(buf, sw, s)
	}
	// TLS: the response's records go out in large writes (tls.go).
	c.wire.cork()
	buf, n, err := c.writeResponseTo(buf, sw, s)
	if ferr := c.wire.uncork(); err == nil {
		err = ferr
	}
	return buf, n, err
}

// writeResponseTo writes the response of s to the connection (through
// the TLS layer on TLS listeners).
func (c *conn) writeResponseTo(buf []byte, sw *spliceWriter, s *slot) ([]byte, int64, error) {
	if s.rawToken { // SaslHandshake v0 flow: size and token, no header
		buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(s.raw)))
		buf = append(buf, s.raw...)
		n, err := c.nc.Write(buf)
		return buf, int64(n), err
	}
	if s.api.vectored != nil {
		bufs, b, spliced := s.api.vectored(sw, buf, s.corr, s.resp)
		buf = b
		if spliced {
			if _, isTLS := c.nc.(*tls.Conn); isTLS {
				n, err := c.writeTLSBuffers(bufs)
				return buf, n, err
			}
			n, err := bufs.WriteTo(c.nc)
			return buf, n, err
		}
	}
	buf = appendResponse(buf[:0], s.corr, s.resp)
	n, err := c.nc.Write(buf)
	return buf, int64(n), err
}

// appendResponse frames resp: size, correlation id, the response header
// tags when the response is flexible (unless its API registered
// responseHeaderV0), then the body.
func appendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if a := lookupAPI(resp.Key()); resp.IsFlexible() && (a == nil || !a.responseHeaderV0) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[:4], uint32(len(dst)-4))
	return dst
}

// errorCode maps an error to its Kafka code (0 for nil).
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// errorName is the Kafka name of code ("NONE" for 0).
func errorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.TypedErrorForCode(code).Message
}

// errMessage is the ErrorMessage of a response: the message of a
// kerrMsg error, else nil (the code says it all).
func errMessage(err error) *string {
	var ke *kafkaError
	if errors.As(err, &ke) {
		return &ke.msg
	}
	return nil
}
