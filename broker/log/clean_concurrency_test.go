package log

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// TestCleanConcurrentWithAppendsReadsRetention: cleans run while producers
// append, readers read from the start and retention runs; every key's
// latest value is readable at the end, and a reader never sees an offset go
// backwards or a batch fail its CRC.
func TestCleanConcurrentWithAppendsReadsRetention(t *testing.T) {
	clk := newClock()
	cfg := compactCfg()
	cfg.Delete = true
	cfg.RetentionMs = -1
	l := mustOpen(t, Options{FS: vfs.NewCrashableMem(), Dir: "/p", Config: cfg, Now: clk.Now})
	defer func() { l.Close() }()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	const writers, perWriter = 3, 150
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				b := kvBatch(testBatch{}, kv{fmt.Sprintf("w%d-k%d", w, i%10), val(fmt.Sprint(i))})
				if _, err := l.Append(b, i%3 == 0); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			off := l.LogStartOffset()
			last := int64(-1)
			for off < l.HighWatermark() {
				rr, err := l.Read(off, 4096, l.HighWatermark())
				if err != nil {
					readerErr <- fmt.Errorf("read %d: %w", off, err)
					return
				}
				if len(rr.Data) == 0 {
					rr.Release()
					break
				}
				b := rr.Data
				for len(b) > 0 {
					h := parseHeader(b)
					if BatchCRC(b[:h.Size()]) != h.CRC || h.BaseOffset <= last {
						rr.Release()
						readerErr <- fmt.Errorf("bad batch at %d (last %d)", h.BaseOffset, last)
						return
					}
					last = h.LastOffset()
					off = last + 1
					b = b[h.Size():]
				}
				rr.Release()
			}
		}
	}()
	cleaned := 0
	deadline := time.Now().Add(20 * time.Second)
	for done := false; !done && time.Now().Before(deadline); {
		ch := make(chan struct{})
		go func() { wg.Wait(); close(ch) }()
		select {
		case <-ch:
			done = true
		default:
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
	l.mu.Lock()
	l.roll()
	l.mu.Unlock()
	if _, err := l.Clean(CleanOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	got := latest(readRecords(t, l))
	for w := range writers {
		for k := range 10 {
			key := fmt.Sprintf("w%d-k%d", w, k)
			// The last value written for key k is the last i with i%10 == k.
			want := fmt.Sprint(perWriter - 10 + k)
			if r, ok := got[key]; !ok || *r.value != want {
				t.Fatalf("%s = %v, want %s", key, r, want)
			}
		}
	}
	if n := len(readRecords(t, l)); n > writers*10*2 {
		t.Fatalf("%d records left after a full clean", n)
	}
}

// TestManagerCleanOnce: the Manager cleans the dirtiest due compacted log
// first, ignores delete-only logs, and its background loop cleans on its
// own.
func TestManagerCleanOnce(t *testing.T) {
	fs := vfs.NewCrashableMem()
	m, err := OpenManager(ManagerOptions{FS: fs, Dir: "/d", RetentionCheckInterval: -1, CleanerInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.Open("a", 0, compactCfg())
	bl, _ := m.Open("b", 0, compactCfg())
	plain, _ := m.Open("plain", 0, Config{SegmentBytes: 400})
	for i := range 40 {
		mustAppend(t, a, kvBatch(testBatch{}, kv{fmt.Sprint("k", i%2), val("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")}), true)
		if i < 20 {
			mustAppend(t, bl, kvBatch(testBatch{}, kv{fmt.Sprint("k", i%2), val("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")}), true)
		}
		mustAppend(t, plain, kvBatch(testBatch{}, kv{"k", val("ppppppppppppppppppppppppppppppppppppp")}), true)
	}
	sizePlain := plain.Size()
	res, err := m.CleanOnce(false)
	if err != nil || !res.Cleaned {
		t.Fatalf("first: %+v %v", res, err)
	}
	// Both were fully dirty (ratio 1): ties go to the first by name.
	if p, _ := a.CleanerProgress(); p < 0 {
		t.Fatal("a not cleaned first")
	}
	if res, err := m.CleanOnce(false); err != nil || !res.Cleaned {
		t.Fatalf("second: %+v %v", res, err)
	}
	if p, _ := bl.CleanerProgress(); p < 0 {
		t.Fatal("b not cleaned")
	}
	if res, err := m.CleanOnce(false); err != nil || res.Cleaned {
		t.Fatalf("third (nothing due): %+v %v", res, err)
	}
	if plain.Size() != sizePlain {
		t.Fatal("delete-only log rewritten")
	}

	// The loop.
	m2, err := OpenManager(ManagerOptions{FS: fs, Dir: "/d2", RetentionCheckInterval: -1, CleanerInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	c, _ := m2.Open("c", 0, compactCfg())
	for i := range 40 {
		mustAppend(t, c, kvBatch(testBatch{}, kv{fmt.Sprint("k", i%2), val("ccccccccccccccccccccccccccccccccccccc")}), true)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, _ := c.CleanerProgress(); p > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background cleaner did not run")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCleanRacesRetention: retention by bytes deletes segments while cleans
// run (compact,delete): cleans either finish or abort with errCleanAborted,
// never fail otherwise, and the log reopens with contiguous reads.
func TestCleanRacesRetention(t *testing.T) {
	cfg := compactCfg()
	cfg.Delete = true
	cfg.RetentionBytes = 3000
	cfg.RetentionMs = -1 // the test batches' timestamps are from 1970
	fs := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 400 {
			if _, err := l.Append(kvBatch(testBatch{}, kv{fmt.Sprint("k", i%7), val(fmt.Sprint("v", i))}), false); err != nil {
				t.Errorf("append: %v", err)
				return
			}
			if i%5 == 0 {
				if _, err := l.ApplyRetention(); err != nil {
					t.Errorf("retention: %v", err)
					return
				}
			}
		}
	}()
	aborted, cleaned := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		res, err := l.Clean(CleanOptions{Force: true})
		switch {
		case errors.Is(err, errCleanAborted):
			aborted++
		case err != nil:
			t.Fatalf("clean: %v", err)
		case res.Cleaned:
			cleaned++
		}
	}
	t.Logf("%d cleans during the appends, %d aborted by retention", cleaned, aborted)
	l.mu.Lock()
	l.roll()
	l.mu.Unlock()
	if res, err := l.Clean(CleanOptions{Force: true}); err != nil || !res.Cleaned {
		t.Fatalf("final clean: %+v %v", res, err)
	}
	want := readRecords(t, l)
	l.Close()
	l = mustOpen(t, Options{FS: fs, Dir: "/p", Config: cfg})
	defer l.Close()
	if got := readRecords(t, l); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after reopen %v, want %v", got, want)
	}
}
