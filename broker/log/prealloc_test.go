//go:build linux

package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// allocated returns the bytes of disk blocks the file at path holds, and
// its size.
func allocated(t *testing.T, path string) (blocks, size int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512, fi.Size()
}

// fallocateWorks reports whether the file system of dir supports
// FALLOC_FL_KEEP_SIZE (the preallocation assertions depend on it; the data
// assertions hold either way).
func fallocateWorks(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return fallocateKeepSize(f.Fd(), 0, 1<<20) == nil
}

const blockSlack = 64 << 10 // block rounding and file-system metadata

// appendStored appends b durably and returns the bytes as stored (Append
// rewrites offsets in place).
func appendStored(t *testing.T, l *Log, b []byte) []byte {
	t.Helper()
	mustAppend(t, l, b, true)
	return b
}

func concatRaw(rs []rawBatch) []byte {
	var out []byte
	for _, r := range rs {
		out = append(out, r.b...)
	}
	return out
}

// TestPreallocActiveSegment: the active segment reserves blocks past its
// end without changing its size; the bytes read back are the bytes
// appended; a roll and a Close give the reservation back; a reopened log
// reads the same bytes.
func TestPreallocActiveSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	works := fallocateWorks(t, dir)
	clk := newClock()
	opts := Options{FS: vfs.Default, Dir: dir, Now: clk.Now, Config: Config{SegmentBytes: 64 << 20, SegmentMs: 60_000}}
	l := mustOpen(t, opts)
	var want []byte
	for range 20 {
		want = append(want, appendStored(t, l, testBatch{records: 10, valueSize: 10 << 10}.build())...)
	}
	first := l.active
	path := first.path(logSuffix)
	blocks, size := allocated(t, path)
	if size != first.size.Load() || size != int64(len(want)) {
		t.Fatalf("file size %d, segment size %d, appended %d", size, first.size.Load(), len(want))
	}
	if works && blocks < size+blockSlack {
		t.Fatalf("active segment of %d bytes holds %d bytes of blocks: no reservation", size, blocks)
	}
	if !works && !first.pre.off {
		t.Fatal("fallocate unsupported, yet preallocation is on")
	}
	if got := concatRaw(readAllRaw(t, l, "active")); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, differ from the %d appended", len(got), len(want))
	}

	// Roll by age: the closed segment gives its reservation back.
	clk.Advance(2 * time.Minute)
	want = append(want, appendStored(t, l, testBatch{records: 10, valueSize: 10 << 10}.build())...)
	if l.active == first {
		t.Fatal("segment did not roll")
	}
	if blocks, size = allocated(t, path); blocks > size+blockSlack {
		t.Fatalf("rolled segment of %d bytes still holds %d bytes of blocks", size, blocks)
	}
	for range 10 {
		want = append(want, appendStored(t, l, testBatch{records: 10, valueSize: 10 << 10}.build())...)
	}
	second := l.active.path(logSuffix)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if blocks, size = allocated(t, second); blocks > size+blockSlack {
		t.Fatalf("closed log's active segment of %d bytes still holds %d bytes of blocks", size, blocks)
	}

	l = mustOpen(t, opts)
	defer l.Close()
	if got := concatRaw(readAllRaw(t, l, "reopened")); !bytes.Equal(got, want) {
		t.Fatalf("after reopen: read back %d bytes, differ from the %d appended", len(got), len(want))
	}
}

// TestPreallocLeftAfterCrash: blocks reserved past the end of the last
// segment (what a crash leaves) change nothing that is read, and the next
// Close gives them back.
func TestPreallocLeftAfterCrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	works := fallocateWorks(t, dir)
	opts := Options{FS: vfs.Default, Dir: dir}
	l := mustOpen(t, opts)
	var want []byte
	for range 5 {
		want = append(want, appendStored(t, l, testBatch{records: 5, valueSize: 1000}.build())...)
	}
	path := l.active.path(logSuffix)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if works {
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, 8<<20); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()

	l = mustOpen(t, opts)
	if got := concatRaw(readAllRaw(t, l, "reopened")); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, differ from the %d appended", len(got), len(want))
	}
	before := int64(len(want))
	// (The batches' timestamps are old, so this append may roll the
	// segment by age: the rolled one gives its reservation back too.)
	want = append(want, appendStored(t, l, testBatch{records: 5, valueSize: 1000}.build())...)
	if got := concatRaw(readAllRaw(t, l, "appended")); !bytes.Equal(got, want) {
		t.Fatalf("after an append: read back %d bytes, differ from the %d appended", len(got), len(want))
	}
	last := l.active.path(logSuffix)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	blocks, size := allocated(t, path)
	if blocks > size+blockSlack || (last != path && size != before) {
		t.Fatalf("after close: %d bytes of blocks for a %d-byte segment (%d appended)", blocks, size, before)
	}
	if blocks, size := allocated(t, last); blocks > size+blockSlack {
		t.Fatalf("after close: %d bytes of blocks for the %d-byte last segment", blocks, size)
	}
}

// TestPreallocRollback: a failed fsync rolls the active segment back by
// truncating it; the reservation state follows, and later appends and
// reads are exact.
func TestPreallocRollback(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	tog := errorfs.NewToggle(errorfs.FailIf(errorfs.And(errorfs.OnOps(errorfs.OpSync), errorfs.PathMatch("*.log")), syscall.EIO))
	l := mustOpen(t, Options{FS: errorfs.Wrap(vfs.Default, tog), Dir: dir})
	defer l.Close()
	var want []byte
	for range 4 {
		want = append(want, appendStored(t, l, testBatch{records: 3, valueSize: 4000}.build())...)
	}
	tog.On()
	if _, err := l.Append(testBatch{records: 3, valueSize: 4000}.build(), true); !errors.Is(err, ErrStorage) {
		t.Fatalf("append with failing fsync: %v", err)
	}
	tog.Off()
	l.mu.Lock()
	end, size := l.active.pre.end, l.active.size.Load()
	l.mu.Unlock()
	if end > size || size != int64(len(want)) {
		t.Fatalf("after rollback: reserved to %d, size %d, want size %d", end, size, len(want))
	}
	for range 3 {
		want = append(want, appendStored(t, l, testBatch{records: 3, valueSize: 4000}.build())...)
	}
	if got := concatRaw(readAllRaw(t, l, "after rollback")); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, differ from the %d appended", len(got), len(want))
	}
}
