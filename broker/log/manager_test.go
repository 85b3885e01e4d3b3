package log

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/vfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestManager(t *testing.T) {
	fsCases(t, func(t *testing.T, fs vfs.FS, dir string) {
		clk := newClock()
		mo := ManagerOptions{FS: fs, Dir: dir, Now: clk.Now, RetentionCheckInterval: 5 * time.Millisecond, Logger: testLogger(t)}
		m, err := OpenManager(mo)
		if err != nil {
			t.Fatal(err)
		}
		a, err := m.Open("orders", 0, Config{SegmentBytes: 1000, RetentionMs: -1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Open("orders", 1, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := m.Open("orders", 0, Config{SegmentBytes: 1000, RetentionMs: -1}); again != a {
			t.Fatal("second Open returned another log")
		}
		if _, err := m.Open("../x", 0, Config{}); err == nil {
			t.Fatal("path traversal accepted")
		}
		for range 10 {
			mustAppend(t, a, testBatch{records: 4, valueSize: 100, firstTs: clk.Now().UnixMilli()}.build(), true)
		}
		mustAppend(t, b, testBatch{records: 1}.build(), true)
		if got, ok := m.Get("orders", 1); !ok || got != b {
			t.Fatal("Get")
		}
		if _, ok := m.Get("orders", 2); ok {
			t.Fatal("Get of unknown partition")
		}
		// The retention loop deletes old segments once retention is set.
		segs := len(a.segments())
		a.SetConfig(Config{SegmentBytes: 1000, RetentionBytes: 1000, RetentionMs: -1})
		deadline := time.Now().Add(10 * time.Second)
		for len(a.segments()) == segs {
			if time.Now().After(deadline) {
				t.Fatal("retention loop did not run")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := m.Remove("orders", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat(b.Dir()); err == nil {
			t.Fatal("removed partition's directory still exists")
		}
		leo := a.LogEndOffset()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second close: %v", err)
		}
		m, err = OpenManager(mo)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		a, err = m.Open("orders", 0, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if a.LogEndOffset() != leo {
			t.Fatalf("reopened leo %d, want %d", a.LogEndOffset(), leo)
		}
	})
}
