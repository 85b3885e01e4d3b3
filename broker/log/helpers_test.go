package log

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/weirhq/weir/vfs"
)

// testBatch describes a RecordBatch v2 for the test builder.
type testBatch struct {
	records    int
	valueSize  int
	firstTs    int64
	tsStep     int64 // timestamp delta between records
	producerID int64 // 0 means -1 (no producer)
	epoch      int16
	seq        int32
	txn        bool
	codec      int  // compression codec; records are compressed with it
	xerial     bool // snappy with the Java client's framing
}

// compressRecords compresses a record payload as a Kafka client would.
func compressRecords(codec int, xerial bool, recs []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case codecNone:
		return recs
	case codecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(recs)
		w.Close()
	case codecSnappy:
		if !xerial {
			return s2.EncodeSnappy(nil, recs)
		}
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(recs) > 0 {
			n := min(len(recs), 100) // small chunks to exercise chunking
			blk := s2.EncodeSnappy(nil, recs[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(blk))))
			buf.Write(blk)
			recs = recs[n:]
		}
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(recs)
		w.Close()
	case codecZstd:
		w, _ := zstd.NewWriter(nil)
		out := w.EncodeAll(recs, nil)
		w.Close()
		return out
	default:
		return recs // an invalid codec: bytes as they are
	}
	return buf.Bytes()
}

// build encodes the batch with base offset 0 and a correct CRC.
func (tb testBatch) build() []byte {
	if tb.records == 0 {
		tb.records = 1
	}
	pid := tb.producerID
	seq := tb.seq
	if pid == 0 {
		pid, seq = -1, -1
	}
	var recs []byte
	maxTs := int64(-1)
	for i := 0; i < tb.records; i++ {
		var body []byte
		body = append(body, 0) // attributes
		tsd := tb.tsStep * int64(i)
		body = binary.AppendVarint(body, tsd)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, 1) // key length
		body = append(body, byte('k'))
		body = binary.AppendVarint(body, int64(tb.valueSize))
		body = append(body, bytes.Repeat([]byte{byte('a' + i%26)}, tb.valueSize)...)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
		if ts := tb.firstTs + tsd; ts > maxTs {
			maxTs = ts
		}
	}
	recs = compressRecords(tb.codec, tb.xerial, recs)
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(recs))
	b = append(b, recs...)
	be := binary.BigEndian
	be.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	attrs := uint16(tb.codec)
	if tb.txn {
		attrs |= attrTransactional
	}
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint32(b[offLastOffsetDelta:], uint32(tb.records-1))
	be.PutUint64(b[offFirstTimestamp:], uint64(tb.firstTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], uint64(pid))
	be.PutUint16(b[offProducerEpoch:], uint16(tb.epoch))
	be.PutUint32(b[offBaseSequence:], uint32(seq))
	be.PutUint32(b[offNumRecords:], uint32(tb.records))
	be.PutUint32(b[offCRC:], BatchCRC(b))
	return b
}

// markerBatch builds a COMMIT or ABORT control batch (Kafka's layout) of
// producer pid at epoch with coordinator epoch ce.
func markerBatch(pid int64, epoch int16, commit bool, ce int32) []byte {
	key := []byte{0, 0, 0, 0}
	if commit {
		key[3] = 1
	}
	val := []byte{0, 0, byte(ce >> 24), byte(ce >> 16), byte(ce >> 8), byte(ce)}
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(val)))
	body = append(body, val...)
	body = binary.AppendVarint(body, 0)
	recs := binary.AppendVarint(nil, int64(len(body)))
	recs = append(recs, body...)
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(recs))
	b = append(b, recs...)
	be := binary.BigEndian
	be.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	be.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	be.PutUint64(b[offFirstTimestamp:], 1000)
	be.PutUint64(b[offMaxTimestamp:], 1000)
	be.PutUint64(b[offProducerID:], uint64(pid))
	be.PutUint16(b[offProducerEpoch:], uint16(epoch))
	be.PutUint32(b[offBaseSequence:], 0xffffffff)
	be.PutUint32(b[offNumRecords:], 1)
	be.PutUint32(b[offCRC:], BatchCRC(b))
	return b
}

// fakeClock is an injected clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func mustOpen(t testing.TB, opts Options) *Log {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte, durable bool) AppendResult {
	t.Helper()
	r, err := l.Append(b, durable)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return r
}

// readAll reads every batch in [from, HighWatermark) and returns their
// headers, checking CRCs and contiguity.
func readAll(t testing.TB, l *Log, from int64) []batchHeader {
	t.Helper()
	var out []batchHeader
	off := from
	hw := l.HighWatermark()
	for off < hw {
		r, err := l.Read(off, 64<<10, hw)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(r.Data) == 0 {
			t.Fatalf("read at %d below hw %d returned nothing", off, hw)
		}
		d := r.Data
		for len(d) > 0 {
			h := parseHeader(d)
			b := d[:h.Size()]
			if _, err := validateStored(b); err != nil {
				t.Fatalf("read batch at offset %d: %v", h.BaseOffset, err)
			}
			if h.LastOffset() >= off {
				if len(out) > 0 && h.BaseOffset != out[len(out)-1].LastOffset()+1 {
					t.Fatalf("offsets not contiguous: %d after %d", h.BaseOffset, out[len(out)-1].LastOffset())
				}
				out = append(out, h)
				off = h.LastOffset() + 1
			}
			d = d[h.Size():]
		}
		r.Release()
	}
	return out
}

// validateStored checks a stored batch: framing and CRC.
func validateStored(b []byte) (batchHeader, error) {
	h := parseHeader(b)
	if r := h.checkFraming(int64(len(b))); r != "" {
		return h, &CorruptionError{Reason: r}
	}
	if BatchCRC(b) != h.CRC {
		return h, &CorruptionError{Reason: "crc"}
	}
	return h, nil
}

// fsCases runs body against the OS file system and MemFS.
func fsCases(t *testing.T, body func(t *testing.T, fs vfs.FS, dir string)) {
	t.Run("mem", func(t *testing.T) { body(t, vfs.NewCrashableMem(), "/data/p-0") })
	t.Run("os", func(t *testing.T) { body(t, vfs.Default, t.TempDir()+"/p-0") })
}

// waitHWAtLeast waits until the high watermark reaches off (10s at most).
func waitHWAtLeast(t testing.TB, l *Log, off int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := l.Changed()
		if l.HighWatermark() >= off {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("high watermark %d did not reach %d", l.HighWatermark(), off)
		}
	}
}
