package log

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weirhq/weir/vfs"
	"github.com/weirhq/weir/vfs/errorfs"
)

// cleanCrashSetup writes a compacted log of several closed segments (one
// cleaning group: segment.bytes is large, the segments are rolled by hand)
// and closes it cleanly.
func cleanCrashSetup(t *testing.T) *vfs.MemFS {
	mem := vfs.NewCrashableMem()
	cfg := compactCfg()
	cfg.SegmentBytes = 1 << 20
	l := mustOpen(t, Options{FS: mem, Dir: "/d/p", Config: cfg})
	for i := range 40 {
		mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("k", i%7), val(fmt.Sprint("v", i))}, kv{fmt.Sprint("j", i%3), val(fmt.Sprint("w", i))}), true)
		if i%6 == 5 {
			l.mu.Lock()
			if err := l.roll(); err != nil {
				t.Fatal(err)
			}
			l.mu.Unlock()
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

// cleanCrashRun opens the log on fs, cleans it and closes it.
func cleanCrashRun(fs vfs.FS) {
	cfg := compactCfg()
	cfg.SegmentBytes = 1 << 20
	l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg})
	if err != nil {
		return
	}
	l.Clean(CleanOptions{Force: true})
	l.Close()
}

// TestCleanPowerCutAtEveryOperation cuts power before each file system
// operation of open + clean + close (strict and torn images) and checks the
// reopened log holds exactly the records before the clean or exactly those
// after it — never a mix, never a lost latest value.
func TestCleanPowerCutAtEveryOperation(t *testing.T) {
	setup := cleanCrashSetup(t)
	readImage := func(fs vfs.FS, where string) []storedRec {
		l, err := Open(Options{FS: fs, Dir: "/d/p", Config: compactCfg(), Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		defer l.Close()
		return readRecords(t, l)
	}
	before := fmt.Sprint(readImage(setup.CrashClone(), "before"))
	// The uncut run, counting operations.
	counter := &powerCut{mem: setup.CrashClone(), n: -1}
	cleanCrashRun(errorfs.Wrap(counter.mem, counter))
	total := counter.seen
	after := readImage(counter.mem.CrashClone(), "after")
	if fmt.Sprint(after) == before {
		t.Fatal("the clean removed nothing")
	}
	want := latest(after)
	afterS := fmt.Sprint(after)
	sawNew, sawOld := false, false
	for n := 1; n <= total+1; n++ {
		for _, torn := range []bool{false, true} {
			mem := setup.CrashClone()
			pc := &powerCut{mem: mem, n: n, torn: torn, rng: rand.New(rand.NewPCG(uint64(n), 5))}
			cleanCrashRun(errorfs.Wrap(mem, pc))
			img := pc.img
			if img == nil {
				img = mem.CrashClone()
			}
			where := fmt.Sprintf("cut at op %d/%d torn=%v", n, total, torn)
			got := readImage(img, where)
			switch fmt.Sprint(got) {
			case before:
				sawOld = true
			case afterS:
				sawNew = true
			default:
				t.Fatalf("%s: a mix:\n%v\nbefore %v\nafter %v", where, got, before, afterS)
			}
			g := latest(got)
			for k, w := range want {
				if g[k].off != w.off {
					t.Fatalf("%s: key %s latest at %d, want %d", where, k, g[k].off, w.off)
				}
			}
			// The image reopens again the same way (recovery is idempotent).
			if again := readImage(img, where+" (2nd open)"); fmt.Sprint(again) != fmt.Sprint(got) {
				t.Fatalf("%s: second open differs", where)
			}
		}
	}
	if !sawNew || !sawOld {
		t.Fatalf("cuts never produced both states (old %v new %v)", sawOld, sawNew)
	}
}

// TestCleanPowerCutManyGroups: the same with a clean of several groups (each
// swapped on its own): every image holds a superset of the fully cleaned
// records and a subset of the original ones (at the same offsets), and every
// key's latest value.
func TestCleanPowerCutManyGroups(t *testing.T) {
	cfg := compactCfg()
	cfg.SegmentBytes = 700
	mem := vfs.NewCrashableMem()
	l := mustOpen(t, Options{FS: mem, Dir: "/d/p", Config: cfg})
	for i := range 60 {
		mustAppend(t, l, kvBatch(testBatch{}, kv{fmt.Sprint("k", i%5), val(fmt.Sprint("v", i))}, kv{fmt.Sprint("j", i%9), val(fmt.Sprint("w", i))}), true)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(fs vfs.FS) {
		l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg})
		if err != nil {
			return
		}
		l.Clean(CleanOptions{Force: true})
		l.Close()
	}
	read := func(fs vfs.FS, where string) map[int64]string {
		l, err := Open(Options{FS: fs, Dir: "/d/p", Config: cfg, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("%s: reopen: %v", where, err)
		}
		defer l.Close()
		m := map[int64]string{}
		for _, r := range readRecords(t, l) {
			m[r.off] = r.key + "=" + *r.value
		}
		return m
	}
	before := read(mem.CrashClone(), "before")
	cleaned, ops := cutRun(mem, run)
	after := read(cleaned, "after")
	if len(after) >= len(before) {
		t.Fatal("nothing cleaned")
	}
	eachPowerCut(mem, ops, 7, run, func(img *vfs.MemFS, where string) {
		got := read(img, where)
		for off, v := range after {
			if got[off] != v {
				t.Fatalf("%s: record %d (%s) lost", where, off, v)
			}
		}
		for off, v := range got {
			if before[off] != v {
				t.Fatalf("%s: record %d = %s was never written there", where, off, v)
			}
		}
	})
}
