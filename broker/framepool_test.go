package broker

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

func TestFramePoolBestFit(t *testing.T) {
	var p framePool
	now := time.Unix(1000, 0)
	small, big := p.get(3<<20), p.get(10<<20)
	if cap(*small) != 3<<20 || cap(*big) != 10<<20 || p.allocs != 2 {
		t.Fatalf("caps %d %d, allocs %d", cap(*small), cap(*big), p.allocs)
	}
	if got := cap(*p.get(100 << 10)); got != 128<<10 {
		t.Fatalf("100 KiB frame: cap %d, want 128 KiB", got)
	}
	p.putAt(big, now)
	p.putAt(small, now)
	if b := p.get(2 << 20); b != small {
		t.Fatal("2 MiB frame not served by the 3 MiB buffer")
	}
	if b := p.get(5 << 20); b != big {
		t.Fatal("5 MiB frame not served by the 10 MiB buffer")
	}
	if p.get(1<<20) == nil || p.allocs != 4 {
		t.Fatalf("allocs %d, want 4 (the pool was empty)", p.allocs)
	}
}

func TestFramePoolBounds(t *testing.T) {
	var p framePool
	now := time.Unix(1000, 0)
	var bufs []*[]byte
	for i := range framePoolMaxFree + 3 {
		bufs = append(bufs, p.get((i+1)<<20))
	}
	for _, b := range bufs {
		p.putAt(b, now)
	}
	if len(p.free) != framePoolMaxFree {
		t.Fatalf("%d free buffers, want %d", len(p.free), framePoolMaxFree)
	}
	// The smallest were evicted.
	var caps []int
	total := 0
	for _, f := range p.free {
		caps = append(caps, cap(*f.b))
		total += cap(*f.b)
	}
	slices.Sort(caps)
	if caps[0] != 4<<20 || total != p.bytes {
		t.Fatalf("free caps %v (bytes %d, counted %d)", caps, p.bytes, total)
	}
	// Byte bound: a 40 MiB buffer evicts until the total fits.
	huge := p.get(40 << 20)
	p.putAt(huge, now)
	if p.bytes > framePoolMaxBytes || !slices.ContainsFunc(p.free, func(f freeFrame) bool { return f.b == huge }) {
		t.Fatalf("after a 40 MiB put: %d bytes free", p.bytes)
	}
	// Larger than the bound: dropped.
	over := make([]byte, framePoolMaxBytes+1)
	before := p.bytes
	p.putAt(&over, now)
	if p.bytes != before {
		t.Fatal("a buffer over the byte bound was kept")
	}
	p.trimIdle(now.Add(framePoolIdle))
}

func TestFramePoolTrimIdle(t *testing.T) {
	var p framePool
	t0 := time.Unix(1000, 0)
	old, recent := p.get(1<<20), p.get(2<<20)
	p.putAt(old, t0)
	p.putAt(recent, t0.Add(5*time.Second))
	p.trimIdle(t0.Add(framePoolIdle))
	if len(p.free) != 1 || p.free[0].b != recent || p.bytes != 2<<20 {
		t.Fatalf("after first trim: %d free, %d bytes", len(p.free), p.bytes)
	}
	p.trimIdle(t0.Add(5*time.Second + framePoolIdle))
	if len(p.free) != 0 || p.bytes != 0 || p.trim != nil {
		t.Fatalf("after second trim: %d free, %d bytes, timer %v", len(p.free), p.bytes, p.trim != nil)
	}
}

// freeFrames is the number of buffers in the broker's frame pool.
func freeFrames(b *Broker) (free, allocs int) {
	b.frames.mu.Lock()
	defer b.frames.mu.Unlock()
	return len(b.frames.free), b.frames.allocs
}

// TestProduceFrameReusedBeforeFsync: a large acks=-1 Produce gives its
// frame back once appended, while it still waits for the fsync, so the
// next request reuses it; with the fsyncs held, requests sent one after
// another need one frame in all. Every record then reads back exactly.
func TestProduceFrameReusedBeforeFsync(t *testing.T) {
	g := newFsyncGate("fr-0")
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, g) })
	t.Cleanup(g.Release) // Close must not hang on a held fsync
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "fr", 1)
	tp, _ := b.topics.get("fr")
	l, ok := tp.partition(0)
	if !ok {
		t.Fatal("no partition 0")
	}
	c := dialRaw(t, b)
	g.Hold()
	const n = 12
	var want []string
	for i := range n {
		var vals []string
		for r := range 8 {
			vals = append(vals, fmt.Sprintf("%d/%d/", i, r)+string(bytes.Repeat([]byte{byte('a' + (i+r)%26)}, 9000+i*37)))
		}
		want = append(want, vals...)
		f := frame(produceReq(9, -1, "fr", 0, makeBatch(1, vals...)), int32(i))
		if len(f) < pooledFrameMin {
			t.Fatalf("frame of %d bytes is not pooled", len(f))
		}
		c.write(f)
		// Once appended, the frame is back in the pool although the
		// fsync is held (the pool held the previous request's frame
		// before this one was read: wait for the append first).
		deadline := time.Now().Add(10 * time.Second)
		for {
			if free, _ := freeFrames(b); free == 1 && l.LogEndOffset() >= int64(8*(i+1)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("request %d: frame not given back while its fsync is held", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, allocs := freeFrames(b); allocs != 1 {
		t.Fatalf("%d frames allocated for %d requests sent one after another, want 1", allocs, n)
	}
	g.Release()
	checkProducedInOrder(t, c, n, "fr", tp.id, want)
}

// A new buffer for a frame close to the largest handed out is as large as
// that one, so it can serve the next large frame; much smaller frames keep
// their size class; the size is forgotten once the pool is idle and empty.
func TestFramePoolGrowsToLargest(t *testing.T) {
	var p framePool
	t0 := time.Unix(1000, 0)
	big := p.get(12 << 20)
	mid := p.get(5 << 20)
	if cap(*mid) != 12<<20 {
		t.Fatalf("5 MiB frame after a 12 MiB one: cap %d, want 12 MiB", cap(*mid))
	}
	if got := cap(*p.get(100 << 10)); got != 128<<10 {
		t.Fatalf("100 KiB frame: cap %d, want 128 KiB", got)
	}
	if got := cap(*p.get(3 << 20)); got != 3<<20 {
		t.Fatalf("3 MiB frame (a quarter of 12 MiB): cap %d, want 3 MiB", got)
	}
	p.putAt(mid, t0)
	if b := p.get(11 << 20); b != mid {
		t.Fatal("an 11 MiB frame was not served by the buffer of the 5 MiB one")
	}
	p.putAt(big, t0)
	p.putAt(mid, t0)
	p.trimIdle(t0.Add(framePoolIdle))
	if len(p.free) != 0 || p.largest != 0 {
		t.Fatalf("after an idle trim: %d free, largest %d", len(p.free), p.largest)
	}
	if got := cap(*p.get(5 << 20)); got != 5<<20 {
		t.Fatalf("5 MiB frame after the pool was idle: cap %d, want 5 MiB", got)
	}
}

// TestProduceFrameSlots: a connection holds at most maxPooledFramesPerConn
// pooled frames. With the appends held (the first request's write is
// stuck), the read loop waits frameSlotWait for a frame to come back, then
// reads further requests into buffers of their own, so pipelined requests
// are never held up for longer than that. Every request is answered in
// order once the write goes through, and every record reads back.
func TestProduceFrameSlots(t *testing.T) {
	g := errorfs.NewGate(errorfs.And(errorfs.OnOps(errorfs.OpWrite), errorfs.PathContains("slots-0"), errorfs.PathMatch("*.log")))
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, g) })
	t.Cleanup(g.Release)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "slots", 1)
	tp, _ := b.topics.get("slots")
	c := dialRaw(t, b)
	g.Hold()
	const n = 5
	var want []string
	for i := range n {
		var vals []string
		for r := range 8 {
			vals = append(vals, fmt.Sprintf("%d/%d/", i, r)+string(bytes.Repeat([]byte{byte('a' + (i+r)%26)}, 9000)))
		}
		want = append(want, vals...)
		f := frame(produceReq(9, -1, "slots", 0, makeBatch(1, vals...)), int32(i))
		if len(f) < pooledFrameMin {
			t.Fatalf("frame of %d bytes is not pooled", len(f))
		}
		c.write(f)
	}
	select {
	case <-g.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the first append did not reach its write")
	}
	// Requests 3..n are read into their own buffers once the two slots
	// stayed taken for frameSlotWait each.
	deadline := time.Now().Add(10 * time.Second)
	for b.frames.slotTimeouts.Load() < n-maxPooledFramesPerConn {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests read past the taken slots, want %d", b.frames.slotTimeouts.Load(), n-maxPooledFramesPerConn)
		}
		time.Sleep(time.Millisecond)
	}
	if _, allocs := freeFrames(b); allocs != maxPooledFramesPerConn {
		t.Fatalf("%d pooled frames allocated with the appends held, want %d", allocs, maxPooledFramesPerConn)
	}
	g.Release()
	checkProducedInOrder(t, c, n, "slots", tp.id, want)
	if free, _ := freeFrames(b); free != maxPooledFramesPerConn {
		t.Fatalf("%d frames back in the pool, want %d", free, maxPooledFramesPerConn)
	}
}

// A client that goes away while its connection holds both frame slots (the
// appends held) and a third large request is on its way: the held requests
// still finish their appends once the write goes through, their frames come
// back to the pool, and nothing of the connection is left behind (goleak in
// TestMain).
func TestProduceFrameSlotsClientGone(t *testing.T) {
	g := errorfs.NewGate(errorfs.And(errorfs.OnOps(errorfs.OpWrite), errorfs.PathContains("gone-0"), errorfs.PathMatch("*.log")))
	b, _ := testBroker(t, func(c *Config) { c.FS = errorfs.Wrap(vfs.Default, g) })
	t.Cleanup(g.Release)
	ctx := testCtx(t)
	mustCreate(t, ctx, b, "gone", 1)
	tp, _ := b.topics.get("gone")
	l, ok := tp.partition(0)
	if !ok {
		t.Fatal("no partition 0")
	}
	c := dialRaw(t, b)
	g.Hold()
	var frames [][]byte
	for i := range maxPooledFramesPerConn + 1 {
		var vals []string
		for r := range 8 {
			vals = append(vals, fmt.Sprintf("%d/%d/", i, r)+string(bytes.Repeat([]byte{'g'}, 9000)))
		}
		frames = append(frames, frame(produceReq(9, -1, "gone", 0, makeBatch(1, vals...)), int32(i)))
	}
	for _, f := range frames[:maxPooledFramesPerConn] {
		c.write(f)
	}
	// The last request: its size and API key only, so the read loop is
	// waiting for a slot or for the rest of the frame when the client goes.
	c.write(frames[maxPooledFramesPerConn][:6])
	select {
	case <-g.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the first append did not reach its write")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, allocs := freeFrames(b); allocs == maxPooledFramesPerConn {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held requests were not read into pooled frames")
		}
		time.Sleep(time.Millisecond)
	}
	c.nc.Close()
	g.Release()
	deadline = time.Now().Add(10 * time.Second)
	for {
		free, allocs := freeFrames(b)
		if free == maxPooledFramesPerConn && l.HighWatermark() == int64(8*maxPooledFramesPerConn) {
			if allocs != maxPooledFramesPerConn {
				t.Fatalf("%d frames allocated, want %d", allocs, maxPooledFramesPerConn)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the client left: %d frames back, %d allocated, high watermark %d (want %d, %d, %d)",
				free, allocs, l.HighWatermark(), maxPooledFramesPerConn, maxPooledFramesPerConn, 8*maxPooledFramesPerConn)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkProducedInOrder reads the answers to n pipelined Produce requests of
// 8 records each (correlation ids 0..n-1), each of which must be appended
// right after the previous one, then reads partition 0 of topic back and
// compares it with want.
func checkProducedInOrder(t *testing.T, c *rawConn, n int, topic string, id [16]byte, want []string) {
	t.Helper()
	for i := range n {
		pr := kmsg.NewPtrProduceRequest()
		pr.Version = 9
		resp := c.readResp(pr, int32(i)).(*kmsg.ProduceResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(8*i) {
			t.Fatalf("request %d: base %d error %d", i, p.BaseOffset, p.ErrorCode)
		}
	}
	var got []string
	for off := int64(0); len(got) < len(want); {
		fr := c.roundTrip(fetchReq(12, topic, id, 0, off, 0), 1000+int32(off)).(*kmsg.FetchResponse)
		vals := batchValues(fr.Topics[0].Partitions[0].RecordBatches, off)
		if len(vals) == 0 {
			t.Fatalf("no records at offset %d", off)
		}
		got = append(got, vals...)
		off += int64(len(vals))
	}
	if !slices.Equal(got, want) {
		t.Fatal("records read back differ from those produced")
	}
}
