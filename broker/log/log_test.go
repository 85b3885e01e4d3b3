package log

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/vfs"
)

func TestAppendReadReopen(t *testing.T) {
	fsCases(t, func(t *testing.T, fs vfs.FS, dir string) {
		clk := newClock()
		opts := Options{FS: fs, Dir: dir, Now: clk.Now, Config: Config{SegmentBytes: 4 << 10, IndexIntervalBytes: 512}}
		l := mustOpen(t, opts)
		var want int64
		for i := 0; i < 50; i++ {
			r := mustAppend(t, l, testBatch{records: 3, valueSize: 100, firstTs: clk.Now().UnixMilli()}.build(), true)
			if r.BaseOffset != want || r.LastOffset != want+2 {
				t.Fatalf("append %d: offsets %d-%d, want %d-%d", i, r.BaseOffset, r.LastOffset, want, want+2)
			}
			want += 3
		}
		if hw := l.HighWatermark(); hw != want {
			t.Fatalf("hw %d want %d", hw, want)
		}
		if n := len(l.segments()); n < 3 {
			t.Fatalf("expected rolled segments, have %d", n)
		}
		hs := readAll(t, l, 0)
		if len(hs) != 50 {
			t.Fatalf("read %d batches", len(hs))
		}
		// Reading from the middle of a batch returns that batch.
		r, err := l.Read(31, 1, want)
		if err != nil {
			t.Fatal(err)
		}
		if h := parseHeader(r.Data); h.BaseOffset != 30 || int64(len(r.Data)) != h.Size() {
			t.Fatalf("read 31: base %d len %d", h.BaseOffset, len(r.Data))
		}
		r.Release()
		if _, err := l.Read(want+1, 100, want); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read beyond hw: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = mustOpen(t, opts)
		defer l.Close()
		if l.LogEndOffset() != want || l.HighWatermark() != want {
			t.Fatalf("after reopen: leo %d hw %d, want %d", l.LogEndOffset(), l.HighWatermark(), want)
		}
		if hs := readAll(t, l, 0); len(hs) != 50 {
			t.Fatalf("read %d batches after reopen", len(hs))
		}
		r2 := mustAppend(t, l, testBatch{records: 1}.build(), true)
		if r2.BaseOffset != want {
			t.Fatalf("append after reopen at %d want %d", r2.BaseOffset, want)
		}
	})
}

func TestReadBufferSizedToData(t *testing.T) {
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p"})
	defer l.Close()
	mustAppend(t, l, testBatch{records: 2, valueSize: 100}.build(), true)
	r, err := l.Read(0, 50<<20, l.HighWatermark())
	if err != nil {
		t.Fatal(err)
	}
	if cap(r.Data) > 64<<10 {
		t.Fatalf("a 50 MiB fetch of a tiny log allocated %d bytes", cap(r.Data))
	}
	r.Release()
	for _, c := range []struct{ n, class int }{{1, 0}, {8192, 0}, {8193, 1}, {1 << 20, 7}, {8 << 20, 10}, {8<<20 + 1, -1}} {
		if got := bufClass(c.n); got != c.class {
			t.Errorf("bufClass(%d) = %d want %d", c.n, got, c.class)
		}
	}
}
