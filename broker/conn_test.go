package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the wire protocol by hand (framing only; bodies via kmsg).
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, b *Broker) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// frame encodes req with header v1/v2 as its version requires.
func frame(req kmsg.Request, corr int32) []byte {
	buf := []byte{0, 0, 0, 0}
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, 4)
	buf = append(buf, "test"...)
	if req.IsFlexible() {
		buf = append(buf, 0)
	}
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	return buf
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *rawConn) send(req kmsg.Request, corr int32) { c.write(frame(req, corr)) }

// read reads one response frame: correlation ID and the rest.
func (c *rawConn) read() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.nc, size[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.nc, body); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:], nil
}

// roundTrip sends req and decodes its response.
func (c *rawConn) roundTrip(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	c.send(req, corr)
	return c.readResp(req, corr)
}

func (c *rawConn) readResp(req kmsg.Request, corr int32) kmsg.Response {
	c.t.Helper()
	got, body, err := c.read()
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	if got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	resp := req.ResponseKind()
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		rd := kbin.Reader{Src: body}
		kmsg.SkipTags(&rd)
		body = rd.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// expectClosed asserts the broker closes the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	_, _, err := c.read()
	if err == nil {
		c.t.Fatal("got a response, want the connection closed")
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open: %v", err)
	}
}

func TestApiVersions(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
		resp := c.roundTrip(req, int32(v)).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", v, resp.ErrorCode)
		}
		keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = k
		}
		for _, want := range []int16{0, 1, 2, 3, 18, 19, 20, 21, 32, 33, 35, 37, 44, 60} {
			if _, ok := keys[want]; !ok {
				t.Errorf("v%d: key %d (%s) not advertised", v, want, kmsg.NameForKey(want))
			}
		}
		if k := keys[1]; k.MinVersion != 4 || k.MaxVersion < 13 {
			t.Errorf("fetch range %d-%d", k.MinVersion, k.MaxVersion)
		}
		for _, txnKey := range []int16{22, 24, 25, 26, 28} { // the transaction coordinator's
			if _, ok := keys[txnKey]; !ok {
				t.Errorf("v%d: key %d (%s) not advertised", v, txnKey, kmsg.NameForKey(txnKey))
			}
		}
		if v >= 3 && (len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].Name != "transaction.version" || resp.FinalizedFeatures[0].MaxVersionLevel != 2) {
			t.Errorf("v%d: finalized features %+v", v, resp.FinalizedFeatures)
		}
	}
	// Invalid client software name (v3+): INVALID_REQUEST.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "bad name!", "1"
	if resp := c.roundTrip(req, 9).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("bad software name: error %d", resp.ErrorCode)
	}
}

// A version above ours is answered v0-shaped with UNSUPPORTED_VERSION and
// the supported list, with a v0 response header (KIP-511).
func TestApiVersionsUnsupportedVersion(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	// Hand-built header: ApiVersions v99 with a garbage body.
	buf := []byte{0, 0, 0, 0, 0, 18, 0, 99, 0, 0, 0, 7, 0xff, 0xff, 1, 2, 3}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	c.write(buf)
	corr, body, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	if corr != 7 {
		t.Fatalf("corr %d", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode v0: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %d, want 35", resp.ErrorCode)
	}
	found := false
	for _, k := range resp.ApiKeys {
		if k.ApiKey == 18 && k.MinVersion == 0 && k.MaxVersion == 4 {
			found = true
		}
	}
	if !found {
		t.Fatalf("ApiVersions range missing from %+v", resp.ApiKeys)
	}
	// The connection stays usable.
	req := kmsg.NewPtrApiVersionsRequest()
	if resp := c.roundTrip(req, 8).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatal(resp.ErrorCode)
	}
}

func TestBadFramesCloseConnection(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.MaxRequestBytes = 1 << 20 })
	header := func(key, version int16) []byte {
		buf := []byte{0, 0, 0, 0}
		buf = binary.BigEndian.AppendUint16(buf, uint16(key))
		buf = binary.BigEndian.AppendUint16(buf, uint16(version))
		buf = binary.BigEndian.AppendUint32(buf, 1)
		return binary.BigEndian.AppendUint16(buf, 0xffff) // null client id
	}
	sized := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	cases := map[string][]byte{
		"negative size":       {0x80, 0, 0, 0},
		"oversize":            binary.BigEndian.AppendUint32(nil, 1<<20+1),
		"too short":           {0, 0, 0, 3}, // nothing after the size: no unread bytes at the close (RST)
		"unknown key":         sized(header(9999, 0)),
		"unsupported version": sized(header(3, 99)),
		"old produce":         sized(header(0, 2)),
		"truncated body":      sized(append(header(3, 1), 0, 0, 0, 5)), // 5 topics, none present
		"bad client id":       sized([]byte{0, 0, 0, 0, 0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'x'}),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialRaw(t, b)
			// A good request first: it must be answered before the close.
			c.send(kmsg.NewPtrApiVersionsRequest(), 1)
			c.write(bad)
			c.readResp(kmsg.NewPtrApiVersionsRequest(), 1)
			c.expectClosed()
		})
	}
	// The broker still serves new connections.
	c := dialRaw(t, b)
	c.roundTrip(kmsg.NewPtrApiVersionsRequest(), 1)
}

// An oversize frame is refused from its size alone: the broker does not
// wait for (or allocate) the body.
func TestOversizeFrameNotRead(t *testing.T) {
	b, _ := testBroker(t)
	c := dialRaw(t, b)
	c.write(binary.BigEndian.AppendUint32(nil, DefaultMaxRequestBytes+1))
	c.expectClosed()
}

// Responses come back in request order even when an earlier request
// (a long-poll fetch) finishes after later ones.
func TestPipeliningOrder(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "p", 1)
	c := dialRaw(t, b)

	tp, _ := b.topics.get("p")
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.MaxWaitMillis = 300
	fetch.MinBytes = 1
	fetch.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "p"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	_ = tp

	var batch bytes.Buffer
	batch.Write(frame(fetch, 1))
	for i := int32(2); i <= 20; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		batch.Write(frame(req, i))
	}
	c.write(batch.Bytes())
	f := c.readResp(fetch, 1).(*kmsg.FetchResponse)
	if len(f.Topics) != 1 || len(f.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("unexpected fetch response %+v", f)
	}
	for i := int32(2); i <= 20; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		c.readResp(req, i)
	}
}

// Many connections at once, each pipelining requests.
func TestManyConnections(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "mc", 4)
	const conns, reqs = 40, 25
	errs := make(chan error, conns)
	for i := range conns {
		go func() {
			nc, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
			var out []byte
			for j := range reqs {
				if j%2 == 0 {
					out = append(out, frame(produceReq(9, -1, "mc", int32(i%4), makeBatch(1, fmt.Sprint(i, "-", j))), int32(j))...)
				} else {
					out = append(out, frame(kmsg.NewPtrMetadataRequest(), int32(j))...)
				}
			}
			if _, err := nc.Write(out); err != nil {
				errs <- err
				return
			}
			rc := &rawConn{t: t, nc: nc}
			for j := range reqs {
				corr, _, err := rc.read()
				if err != nil {
					errs <- err
					return
				}
				if corr != int32(j) {
					errs <- fmt.Errorf("conn %d: response %d has correlation %d", i, j, corr)
					return
				}
			}
			errs <- nil
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tp, _ := b.topics.get("mc")
	var total int64
	for _, l := range tp.parts {
		total += l.HighWatermark()
	}
	if want := int64(conns * (reqs + 1) / 2); total != want {
		t.Fatalf("%d records, want %d", total, want)
	}
}

func TestReadFrame(t *testing.T) {
	for _, n := range []int{0, 1, 1 << 20, 1<<20 + 1, 5<<20 + 3} {
		data := bytes.Repeat([]byte{7}, n)
		got, err := readFrame(bytes.NewReader(data), n)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("n=%d: err %v, %d bytes", n, err, len(got))
		}
		if n > 0 {
			if _, err := readFrame(bytes.NewReader(data[:n-1]), n); err == nil {
				t.Fatalf("n=%d: truncated frame read without error", n)
			}
		}
	}
}

// A large produce request (several MiB, read in chunks) is appended intact.
func TestLargeProduce(t *testing.T) {
	b, _ := testBroker(t)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "big", 1, "max.message.bytes", "10000000")
	tp, _ := b.topics.get("big")
	c := dialRaw(t, b)
	val := string(bytes.Repeat([]byte("x"), 3<<20))
	resp := c.roundTrip(produceReq(9, -1, "big", 0, makeBatch(1, val)), 1).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("produce: %d", p.ErrorCode)
	}
	req := fetchReq(12, "big", tp.id, 0, 0, 0)
	fr := c.roundTrip(req, 2).(*kmsg.FetchResponse)
	if got := batchValues(fr.Topics[0].Partitions[0].RecordBatches, 0); len(got) != 1 || got[0] != val {
		t.Fatal("large record did not round trip")
	}
}

// An idle connection is closed after ConnectionsMaxIdle; one waiting on a
// long poll is not idle: its fetch runs to MaxWait (an idle close would
// cancel it early). Only lower bounds on time are asserted.
func TestIdleConnectionClosed(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.ConnectionsMaxIdle = 100 * time.Millisecond })
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "idle", 1)
	tp, _ := b.topics.get("idle")
	busy := dialRaw(t, b)
	start := time.Now()
	busy.send(fetchReq(12, "idle", tp.id, 0, 0, 500), 1) // 5x the idle time
	idle := dialRaw(t, b)
	idle.roundTrip(kmsg.NewPtrApiVersionsRequest(), 1)
	idle.expectClosed()
	busy.readResp(fetchReq(12, "idle", tp.id, 0, 0, 0), 1)
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("long poll ended after %v: the connection was treated as idle", waited)
	}
}
