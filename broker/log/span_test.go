package log

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// spanBytes reads a whole span.
func spanBytes(t testing.TB, s *Span) []byte {
	t.Helper()
	b := make([]byte, s.Len())
	if n, err := s.ReadAt(b, 0); err != nil || int64(n) != s.Len() {
		t.Fatalf("span read: %d of %d: %v", n, s.Len(), err)
	}
	return b
}

// TestReadSpanMatchesRead: for random offsets, limits and upper bounds,
// across segments of batches of mixed sizes (some larger than the index
// interval, some many to an interval), ReadSpan's bytes are Read's, and
// its NextOffset bounds them as documented.
func TestReadSpanMatchesRead(t *testing.T) {
	fsCases(t, func(t *testing.T, fs vfs.FS, dir string) {
		l := mustOpen(t, Options{FS: fs, Dir: dir, Config: Config{SegmentBytes: 64 << 10, IndexIntervalBytes: 1024}})
		defer l.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		for range 300 {
			size := []int{10, 50, 300, 2000, 5000}[rng.IntN(5)]
			mustAppend(t, l, testBatch{records: 1 + rng.IntN(4), valueSize: size}.build(), true)
		}
		hw := l.HighWatermark()
		if len(l.segments()) < 3 {
			t.Fatalf("want several segments, have %d", len(l.segments()))
		}
		for range 3000 {
			off := rng.Int64N(hw + 1)
			maxBytes := []int{1, 100, 4000, 20000, 100000}[rng.IntN(5)] + rng.IntN(3000)
			upTo := hw
			if rng.IntN(3) == 0 {
				upTo = rng.Int64N(hw + 1)
			}
			rr, rerr := l.Read(off, maxBytes, upTo)
			sr, serr := l.ReadSpan(off, maxBytes, upTo)
			if (rerr == nil) != (serr == nil) {
				t.Fatalf("Read(%d, %d, %d) err %v, ReadSpan err %v", off, maxBytes, upTo, rerr, serr)
			}
			if sr.HighWatermark != rr.HighWatermark || sr.LogStartOffset != rr.LogStartOffset {
				t.Fatalf("offsets: span %d/%d read %d/%d", sr.HighWatermark, sr.LogStartOffset, rr.HighWatermark, rr.LogStartOffset)
			}
			var got []byte
			if sr.Span != nil {
				got = spanBytes(t, sr.Span)
				end := int64(-1)
				for d := got; len(d) > 0; {
					h := parseHeader(d)
					end = h.NextOffset()
					d = d[h.Size():]
				}
				// NextOffset is the end of the last batch, or the
				// base offset of the batch after it.
				if next := sr.Span.NextOffset(); next != end {
					after, err := l.Read(end, 1, hw)
					if err != nil || len(after.Data) == 0 || parseHeader(after.Data).BaseOffset != next {
						t.Fatalf("ReadSpan(%d, %d, %d): NextOffset %d, last batch ends %d", off, maxBytes, upTo, next, end)
					}
					after.Release()
				}
				sr.Span.Release()
			}
			if !bytes.Equal(got, rr.Data) {
				t.Fatalf("ReadSpan(%d, %d, %d): %d bytes, Read %d", off, maxBytes, upTo, len(got), len(rr.Data))
			}
			rr.Release()
		}
		if _, err := l.ReadSpan(hw+1, 100, hw); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("beyond hw: %v", err)
		}
	})
}

// TestSpanOutlivesSegment: a span taken before retention deletes its
// segment, the cleaner replaces it, or the log is deleted, still reads the
// bytes it was taken with, and the files go once it is released.
func TestSpanOutlivesSegment(t *testing.T) {
	cases := map[string]func(t *testing.T, l *Log){
		"retention": func(t *testing.T, l *Log) {
			if n, err := l.ApplyRetention(); err != nil || n == 0 {
				t.Fatalf("retention: %d %v", n, err)
			}
		},
		"delete-records": func(t *testing.T, l *Log) {
			if _, err := l.DeleteRecords(l.HighWatermark()); err != nil {
				t.Fatal(err)
			}
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
		},
		"compaction": func(t *testing.T, l *Log) {
			l.mu.Lock()
			err := l.roll()
			l.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if res, err := l.Clean(CleanOptions{Force: true}); err != nil || !res.Cleaned || res.RecordsRemoved == 0 {
				t.Fatalf("clean: %+v %v", res, err)
			}
		},
		"log-deleted": func(t *testing.T, l *Log) {
			if err := l.Delete(); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, remove := range cases {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			cfg := Config{SegmentBytes: 1000, RetentionBytes: 1, RetentionMs: -1}
			if name == "compaction" {
				cfg = Config{SegmentBytes: 1000, Compact: true}
			}
			l := mustOpen(t, Options{FS: mem, Dir: "/p", Config: cfg})
			defer l.Close()
			value := strings.Repeat("v", 100)
			for i := range 10 {
				mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("key-", i%3), &value}, kv{"key-x", &value}), true)
			}
			rr, err := l.Read(0, 1<<20, l.HighWatermark())
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.Clone(rr.Data)
			rr.Release()
			sr, err := l.ReadSpan(0, 1<<20, l.HighWatermark())
			if err != nil || sr.Span == nil {
				t.Fatalf("span: %v", err)
			}
			seg := sr.Span.seg
			remove(t, l)
			if slices.Contains(l.segments(), seg) {
				t.Fatal("the span's segment is still in the log")
			}
			if got := spanBytes(t, sr.Span); !bytes.Equal(got, want) {
				t.Fatal("span bytes changed after its segment was removed")
			}
			// The cleaner's swap replaces the files under the same
			// names; the others remove them once released.
			removes := name == "retention" || name == "delete-records"
			if removes {
				if _, err := mem.Stat(seg.path(logSuffix)); err != nil {
					t.Fatalf("file removed while a span holds it: %v", err)
				}
			}
			sr.Span.Release()
			sr.Span.Release() // twice: nothing
			if _, err := mem.Stat(seg.path(logSuffix)); removes && err == nil {
				t.Fatal("file not removed after the span was released")
			}
			if _, err := sr.Span.ReadAt(make([]byte, 1), 0); err == nil {
				t.Fatal("read of a released span succeeded")
			}
		})
	}
}

// TestSpanReadAt: reads within, at the end of and past a span.
func TestSpanReadAt(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	for range 3 {
		mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
	}
	sr, err := l.ReadSpan(0, 1<<20, l.HighWatermark())
	if err != nil || sr.Span == nil {
		t.Fatal(err)
	}
	defer sr.Span.Release()
	all := spanBytes(t, sr.Span)
	p := make([]byte, 100)
	if n, err := sr.Span.ReadAt(p, sr.Span.Len()-50); n != 50 || !errors.Is(err, io.EOF) || !bytes.Equal(p[:50], all[len(all)-50:]) {
		t.Fatalf("read across the end: %d %v", n, err)
	}
	if _, err := sr.Span.ReadAt(p, sr.Span.Len()+1); err == nil {
		t.Fatal("read past the end succeeded")
	}
}

// TestSpanConcurrentWithAppendsCleansRetention: spans taken while writers
// append, the cleaner swaps segments and retention deletes them, and read
// only after a few more spans were taken (as a response waits to be
// written), hold whole batches with valid CRCs and increasing offsets.
func TestSpanConcurrentWithAppendsCleansRetention(t *testing.T) {
	cfg := compactCfg()
	cfg.Delete = true
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 3000
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg})
	defer l.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 600 {
			b := kvBatch(testBatch{}, kv{fmt.Sprintf("k%d", i%10), val(fmt.Sprint(i))})
			if _, err := l.Append(b, i%3 == 0); err != nil {
				t.Errorf("append: %v", err)
				return
			}
		}
	}()
	readerErr := make(chan error, 1)
	stop := make(chan struct{})
	var spansRead atomic.Int64
	go func() {
		defer close(readerErr)
		var held []*Span
		check := func(s *Span) error {
			defer s.Release()
			b := make([]byte, s.Len())
			if _, err := s.ReadAt(b, 0); err != nil {
				return err
			}
			last := int64(-1)
			for len(b) > 0 {
				h := parseHeader(b)
				if h.Size() > int64(len(b)) || BatchCRC(b[:h.Size()]) != h.CRC || h.BaseOffset <= last || h.NextOffset() > s.NextOffset() {
					return fmt.Errorf("bad batch at %d (last %d, span next %d)", h.BaseOffset, last, s.NextOffset())
				}
				last = h.LastOffset()
				b = b[h.Size():]
			}
			spansRead.Add(1)
			return nil
		}
		defer func() {
			for _, s := range held {
				s.Release()
			}
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			off := l.LogStartOffset()
			for off < l.HighWatermark() {
				sr, err := l.ReadSpan(off, 2000, l.HighWatermark())
				if errors.Is(err, ErrOffsetOutOfRange) {
					break // retention passed us: start over
				}
				if err != nil {
					readerErr <- fmt.Errorf("span %d: %w", off, err)
					return
				}
				if sr.Span == nil {
					break
				}
				off = sr.Span.NextOffset()
				held = append(held, sr.Span)
				if len(held) > 4 {
					if err := check(held[0]); err != nil {
						readerErr <- err
						return
					}
					held = held[1:]
				}
			}
		}
	}()
	cleaned := 0
	deadline := time.Now().Add(20 * time.Second)
	for finished := false; !finished || spansRead.Load() < 20; {
		select {
		case <-done:
			finished = true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: appends done %v, %d spans read", finished, spansRead.Load())
		}
		res, err := l.Clean(CleanOptions{Force: true})
		if err != nil && err != errCleanAborted {
			t.Fatalf("clean: %v", err)
		}
		if res.Cleaned {
			cleaned++
		}
		if _, err := l.ApplyRetention(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	if cleaned == 0 {
		t.Fatal("no clean ran")
	}
	t.Logf("%d cleans, %d spans read", cleaned, spansRead.Load())
}
