package broker

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	rtmetrics "runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitFor polls cond every 5ms for at most d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReadBudgetStopsReading: with queued.max.request.bytes spent by one
// connection's half-sent large frame, another connection's large request
// is not read (no error either) until the first connection goes; then it
// is read and answered. Small requests keep flowing meanwhile.
func TestReadBudgetStopsReading(t *testing.T) {
	b, _ := testBroker(t, func(c *Config) { c.QueuedMaxRequestBytes = 2 << 20 })
	hog := dialRaw(t, b)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 3<<20)
	hog.write(hdr[:])
	hog.write(make([]byte, 1<<20))
	waitFor(t, 10*time.Second, "the 3 MiB reservation", func() bool { return b.reading.inUse() == 3<<20 })

	big := dialRaw(t, b)
	req := produceReq(9, 1, "nope", 0, make([]byte, 3<<19)) // 1.5 MiB frame
	big.send(req, 7)
	_ = big.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, _, err := big.read(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("large request answered while the read budget was spent: %v", err)
	}
	small := dialRaw(t, b)
	if resp := small.roundTrip(kmsg.NewPtrApiVersionsRequest(), 1).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("small request while the budget was spent: %d", resp.ErrorCode)
	}

	hog.nc.Close()
	_ = big.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp := big.readResp(req, 7).(*kmsg.ProduceResponse)
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("large request after the budget freed: error %d", ec)
	}
	if peak := b.reading.peakUse(); peak > 2<<20+3<<20 {
		t.Fatalf("read budget peak %d, above the budget plus one frame", peak)
	}
	waitFor(t, 5*time.Second, "every reservation back", func() bool { return b.reading.inUse() == 0 })
}

// heapHeld is the heap memory the process holds from the OS (objects,
// fragmentation and free spans not yet returned), from runtime/metrics.
func heapHeld() uint64 {
	s := []rtmetrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	rtmetrics.Read(s)
	var n uint64
	for _, x := range s {
		n += x.Value.Uint64()
	}
	return n
}

// TestReadBudgetReturnsMemory: the burst, 20 connections each
// sending 10 MB of a 100 MB frame and closing. The memory of the frames
// being read stays within the read budget plus one frame, and once the
// connections are gone the heap the process holds is back within twice
// what it held before the burst.
func TestReadBudgetReturnsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 200 MB over loopback")
	}
	b, _ := testBroker(t)
	idle := heapHeld()
	const conns, frameSize, sent = 20, 100 << 20, 10 << 20
	body := make([]byte, sent)
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], frameSize)
	var wg sync.WaitGroup
	ncs := make([]net.Conn, conns)
	for i := range ncs {
		nc, err := net.DialTimeout("tcp", b.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ncs[i] = nc
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writes to a connection the broker does not read (budget
			// spent) block: the deadline ends them, as a client's would.
			_ = nc.SetWriteDeadline(time.Now().Add(3 * time.Second))
			_, _ = nc.Write(hdr[:])
			_, _ = nc.Write(body)
		}()
	}
	wg.Wait()
	for _, nc := range ncs {
		nc.Close()
	}
	body = nil
	waitFor(t, 30*time.Second, "the connections to end", func() bool {
		b.mu.Lock()
		n := len(b.conns)
		b.mu.Unlock()
		return n == 0 && b.reading.inUse() == 0
	})
	waitFor(t, 10*time.Second, "memory returned to the OS", b.reading.settled)
	if peak := b.reading.peakUse(); peak > DefaultQueuedMaxRequestBytes+frameSize {
		t.Errorf("read budget peak %d MB, above the budget plus one frame", peak>>20)
	}
	after := heapHeld()
	t.Logf("heap held: idle %d MB, after the burst %d MB", idle>>20, after>>20)
	if after > 2*idle {
		t.Fatalf("heap held after the burst %d MB, more than twice idle (%d MB)", after>>20, idle>>20)
	}
}
