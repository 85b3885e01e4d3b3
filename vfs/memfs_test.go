package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// must(f())(t) returns f's value, failing t on f's error.
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// content returns name's content in fsys, or "<absent>".
func content(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return string(must(io.ReadAll(f))(t))
}

func write(t *testing.T, fsys FS, name, data string, sync bool) {
	t.Helper()
	f := must(fsys.OpenReadWrite(name))(t)
	must(f.Seek(0, io.SeekEnd))(t)
	must(f.Write([]byte(data)))(t)
	if sync {
		ok(t, f.Sync())
	}
	ok(t, f.Close())
}

func syncDir(t *testing.T, fsys FS, dir string) {
	t.Helper()
	d := must(fsys.OpenDir(dir))(t)
	ok(t, d.Sync())
	ok(t, d.Close())
}

func TestCrashFileData(t *testing.T) {
	m := NewCrashableMem()
	ok(t, m.MkdirAll("d", 0o755))
	syncDir(t, m, "")
	write(t, m, "d/f", "synced", true)
	syncDir(t, m, "d")
	write(t, m, "d/f", "+unsynced", false)
	if got := content(t, m.CrashClone(), "d/f"); got != "synced" {
		t.Fatalf("unsynced append survived: %q", got)
	}
	// Unsynced overwrite and truncate are lost; a later sync keeps them.
	f := must(m.OpenReadWrite("d/f"))(t)
	must(f.WriteAt([]byte("S"), 0))(t)
	ok(t, f.Truncate(3))
	if got := content(t, m.CrashClone(), "d/f"); got != "synced" {
		t.Fatalf("unsynced overwrite/truncate survived: %q", got)
	}
	ok(t, f.Sync())
	if got := content(t, m.CrashClone(), "d/f"); got != "Syn" {
		t.Fatalf("after sync: %q", got)
	}
	// Create of an existing file truncates the same file: unsynced until Sync.
	ok(t, must(m.Create("d/f"))(t).Close())
	if got := content(t, m.CrashClone(), "d/f"); got != "Syn" {
		t.Fatalf("unsynced Create-truncate survived: %q", got)
	}
	// Data synced through a handle is durable under the name it has now.
	ok(t, f.Close())
}

func TestCrashDirEntries(t *testing.T) {
	m := NewCrashableMem()
	// A synced file in a never-synced directory entry is lost.
	ok(t, m.MkdirAll("p/q", 0o755))
	write(t, m, "p/q/f", "data", true)
	syncDir(t, m, "p/q")
	c := m.CrashClone()
	if _, err := c.Stat("p"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced mkdir survived: %v", err)
	}
	// Syncing the chain of parents makes it reachable.
	syncDir(t, m, "p")
	syncDir(t, m, "/")
	if got := content(t, m.CrashClone(), "p/q/f"); got != "data" {
		t.Fatalf("got %q", got)
	}
	// A durable entry whose data was never synced survives empty.
	write(t, m, "p/q/empty", "lost", false)
	syncDir(t, m, "p/q")
	if got := content(t, m.CrashClone(), "p/q/empty"); got != "" {
		t.Fatalf("got %q", got)
	}
	// Remove needs a dir sync too.
	ok(t, m.Remove("p/q/f"))
	if got := content(t, m.CrashClone(), "p/q/f"); got != "data" {
		t.Fatalf("unsynced remove: got %q", got)
	}
	syncDir(t, m, "p/q")
	if got := content(t, m.CrashClone(), "p/q/f"); got != "<absent>" {
		t.Fatalf("synced remove: got %q", got)
	}
}

// TestCrashRename checks the atomic-replace idiom: write tmp, sync tmp,
// rename over final, sync dir.
func TestCrashRename(t *testing.T) {
	m := NewCrashableMem()
	write(t, m, "final", "old", true)
	syncDir(t, m, "")
	write(t, m, "tmp", "new", true)
	ok(t, m.Rename("tmp", "final"))
	c := m.CrashClone()
	if got := content(t, c, "final"); got != "old" {
		t.Fatalf("before dir sync: final = %q", got)
	}
	if got := must(c.List(""))(t); !slices.Equal(got, []string{"final"}) {
		t.Fatalf("before dir sync: %v", got)
	}
	syncDir(t, m, "")
	c = m.CrashClone()
	if got := content(t, c, "final"); got != "new" {
		t.Fatalf("after dir sync: final = %q", got)
	}
	if got := must(c.List(""))(t); !slices.Equal(got, []string{"final"}) {
		t.Fatalf("after dir sync: %v", got)
	}
}

// TestCrashCrossDirRename: each directory's half of a rename is durable only
// once that directory is synced.
func TestCrashCrossDirRename(t *testing.T) {
	for _, tc := range []struct {
		syncOld, syncNew bool
		want             string
	}{
		{false, false, "a/f=x b/f=<absent>"},
		{true, false, "a/f=<absent> b/f=<absent>"},
		{false, true, "a/f=x b/f=x"},
		{true, true, "a/f=<absent> b/f=x"},
	} {
		m := NewCrashableMem()
		ok(t, m.MkdirAll("a", 0o755))
		ok(t, m.MkdirAll("b", 0o755))
		write(t, m, "a/f", "x", true)
		for _, d := range []string{"a", "b", ""} {
			syncDir(t, m, d)
		}
		ok(t, m.Rename("a/f", "b/f"))
		if tc.syncOld {
			syncDir(t, m, "a")
		}
		if tc.syncNew {
			syncDir(t, m, "b")
		}
		c := m.CrashClone()
		got := fmt.Sprintf("a/f=%s b/f=%s", content(t, c, "a/f"), content(t, c, "b/f"))
		if got != tc.want {
			t.Errorf("syncOld=%v syncNew=%v: %s, want %s", tc.syncOld, tc.syncNew, got, tc.want)
		}
	}
}

// TestCrashCloneIndependent checks that a clone and its origin share no
// mutable state (they share bytes copy-on-write), against a simple model.
func TestCrashCloneIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type fsModel struct {
		fs            *MemFS
		f             File
		live, durable []byte
	}
	newModel := func(m *MemFS, data []byte) *fsModel {
		f := must(m.OpenReadWrite("f"))(t)
		return &fsModel{fs: m, f: f, live: slices.Clone(data), durable: slices.Clone(data)}
	}
	m := NewCrashableMem()
	models := []*fsModel{newModel(m, nil)}
	syncDir(t, m, "")
	for step := range 3000 {
		x := models[rng.IntN(len(models))]
		p := []byte(fmt.Sprintf("<%d>", step))
		switch op := rng.IntN(10); {
		case op < 3: // append
			must(x.f.Seek(0, io.SeekEnd))(t)
			must(x.f.Write(p))(t)
			x.live = append(x.live, p...)
		case op < 5: // overwrite (may extend)
			off := rng.IntN(len(x.live) + 3)
			must(x.f.WriteAt(p, int64(off)))(t)
			for len(x.live) < off+len(p) {
				x.live = append(x.live, 0)
			}
			copy(x.live[off:], p)
		case op < 6:
			size := rng.IntN(len(x.live) + 3)
			ok(t, x.f.Truncate(int64(size)))
			for len(x.live) < size {
				x.live = append(x.live, 0)
			}
			x.live = x.live[:size]
		case op < 8:
			ok(t, x.f.Sync())
			x.durable = slices.Clone(x.live)
		case len(models) < 8:
			models = append(models, newModel(x.fs.CrashClone(), x.durable))
		}
		for i, y := range models {
			got := must(io.ReadAll(io.NewSectionReader(y.f, 0, 1<<30)))(t)
			if !bytes.Equal(got, y.live) {
				t.Fatalf("step %d: fs %d live = %q, want %q", step, i, got, y.live)
			}
			if got := content(t, y.fs.CrashClone(), "f"); got != string(y.durable) {
				t.Fatalf("step %d: fs %d durable = %q, want %q", step, i, got, y.durable)
			}
		}
	}
}

func TestCrashTornWrites(t *testing.T) {
	m := NewCrashableMem()
	write(t, m, "append", "base", true)
	write(t, m, "overwrite", "base", true)
	write(t, m, "new", "", true)
	syncDir(t, m, "")
	write(t, m, "append", "0123456789", false)
	write(t, m, "new", "abc", false)
	f := must(m.OpenReadWrite("overwrite"))(t)
	must(f.WriteAt([]byte("BASE-and-more"), 0))(t)
	ok(t, f.Close())

	rng := rand.New(rand.NewPCG(3, 4))
	seen := map[int]bool{}
	for range 200 {
		c := m.CrashCloneWith(CrashOptions{Rand: rng, TornWrites: true})
		got := content(t, c, "append")
		if !strings.HasPrefix("base0123456789", got) || len(got) < 4 {
			t.Fatalf("torn append: %q", got)
		}
		seen[len(got)-4] = true
		if got := content(t, c, "new"); !strings.HasPrefix("abc", got) {
			t.Fatalf("torn new file: %q", got)
		}
		if got := content(t, c, "overwrite"); got != "base" {
			t.Fatalf("overwritten file kept unsynced bytes: %q", got)
		}
	}
	// Every prefix length 0..10 occurs with this many tries.
	for n := 0; n <= 10; n++ {
		if !seen[n] {
			t.Errorf("tail prefix of %d bytes never kept (seen %v)", n, seen)
		}
	}
}

func TestCrashUnsyncedEntries(t *testing.T) {
	m := NewCrashableMem()
	write(t, m, "keep", "k", true)
	write(t, m, "b", "b", true)
	syncDir(t, m, "")
	// Journal: create a, rename a->c, remove b, create d.
	write(t, m, "a", "a", true)
	ok(t, m.Rename("a", "c"))
	ok(t, m.Remove("b"))
	write(t, m, "d", "d", true)
	// Exactly the states after each prefix of the journal.
	allowed := map[string]bool{
		"[b keep]": true, "[a b keep]": true, "[b c keep]": true, "[c keep]": true, "[c d keep]": true,
	}
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[string]bool{}
	for range 200 {
		c := m.CrashCloneWith(CrashOptions{Rand: rng, UnsyncedEntries: true})
		s := fmt.Sprint(must(c.List(""))(t))
		if !allowed[s] {
			t.Fatalf("state %s is not a journal prefix", s)
		}
		seen[s] = true
	}
	if len(seen) != len(allowed) {
		t.Fatalf("saw %v, want all of %v", seen, allowed)
	}
	// A dir sync makes all of it durable; nothing earlier can come back.
	syncDir(t, m, "")
	ok(t, m.Remove("c"))
	for range 50 {
		c := m.CrashCloneWith(CrashOptions{Rand: rng, UnsyncedEntries: true})
		if s := fmt.Sprint(must(c.List(""))(t)); s != "[c d keep]" && s != "[d keep]" {
			t.Fatalf("after sync: %s", s)
		}
	}
}

// TestMemFSConcurrent exercises the locking (run with -race).
func TestMemFSConcurrent(t *testing.T) {
	m := NewCrashableMem()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("f%d", g)
			f, err := m.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := range 200 {
				if _, err := f.Write([]byte("x")); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					f.Sync()
					m.CrashClone()
					m.List("")
				}
				buf := make([]byte, 1)
				if _, err := f.ReadAt(buf, int64(i)); err != nil || buf[0] != 'x' {
					t.Errorf("ReadAt %d: %v %q", i, err, buf)
					return
				}
			}
		}()
	}
	wg.Wait()
	for g := range 4 {
		if fi := must(m.Stat(fmt.Sprintf("f%d", g)))(t); fi.Size() != 200 {
			t.Fatalf("f%d size %d", g, fi.Size())
		}
	}
}

// TestCrashModelRandom drives random file and directory operations, with
// crashes, against a model of the crash rules. Strict: a name survives iff
// its directory entry was synced, with the data last synced into the file it
// then named. With CrashOptions: the directory is in the state after some
// prefix of its unsynced operations, and a file whose unsynced change is a
// pure append holds its durable bytes plus a prefix of the tail.
func TestCrashModelRandom(t *testing.T) {
	type file struct {
		live, durable string
		diverged      bool // changed below the durable length since the last sync
	}
	rng := rand.New(rand.NewPCG(7, 8))
	m := NewCrashableMem()
	ok(t, m.MkdirAll("d", 0o755))
	syncDir(t, m, "")
	live := map[string]*file{}
	// states[0] is the durable directory; states[i] the state after the
	// i-th unsynced directory operation.
	states := []map[string]*file{{}}
	entryOp := func() { states = append(states, maps.Clone(live)) }
	names := []string{"a", "b", "c", "e"}
	for step := range 6000 {
		x := names[rng.IntN(len(names))]
		y := names[rng.IntN(len(names))]
		path := "d/" + x
		switch op := rng.IntN(13); {
		case op < 3: // append (creating if needed); sometimes Create-truncate first
			if live[x] == nil {
				live[x] = &file{}
				ok(t, must(m.Create(path))(t).Close())
				entryOp()
			} else if op == 0 {
				ok(t, must(m.Create(path))(t).Close())
				live[x].diverged = live[x].diverged || live[x].durable != ""
				live[x].live = ""
			}
			tok := fmt.Sprintf("%d,", step)
			write(t, m, path, tok, false)
			live[x].live += tok
		case op < 6:
			if live[x] != nil {
				f := must(m.OpenReadWrite(path))(t)
				ok(t, f.Sync())
				ok(t, f.Close())
				live[x].durable, live[x].diverged = live[x].live, false
			}
		case op < 7:
			if live[x] != nil && x != y {
				ok(t, m.Rename(path, "d/"+y))
				live[y] = live[x]
				delete(live, x)
				entryOp()
			}
		case op < 8:
			if live[x] != nil {
				ok(t, m.Remove(path))
				delete(live, x)
				entryOp()
			}
		case op < 10:
			syncDir(t, m, "d")
			states = []map[string]*file{maps.Clone(live)}
		case op < 11: // crash with options; check; carry on with m
			c := m.CrashCloneWith(CrashOptions{Rand: rng, TornWrites: true, UnsyncedEntries: true})
			got := must(c.List("d"))(t)
			matched := false
			for _, st := range states {
				if !slices.Equal(got, slices.Sorted(maps.Keys(st))) {
					continue
				}
				good := true
				for name, f := range st {
					content := content(t, c, "d/"+name)
					torn := !f.diverged && len(content) >= len(f.durable) && strings.HasPrefix(f.live, content)
					good = good && (content == f.durable || torn)
				}
				matched = matched || good
			}
			if !matched {
				t.Fatalf("step %d: crash state %v matches no journal prefix", step, got)
			}
		default: // strict crash; check; continue on the crashed file system
			m = m.CrashClone()
			want := slices.Sorted(maps.Keys(states[0]))
			if got := must(m.List("d"))(t); !slices.Equal(got, want) {
				t.Fatalf("step %d: names %v, want %v", step, got, want)
			}
			live = map[string]*file{}
			for name, f := range states[0] {
				if got := content(t, m, "d/"+name); got != f.durable {
					t.Fatalf("step %d: %s = %q, want %q", step, name, got, f.durable)
				}
				// The same file under two names stays one file.
				f.live, f.diverged = f.durable, false
				live[name] = f
			}
			states = []map[string]*file{maps.Clone(live)}
		}
	}
}

func TestMemFSFileSizeLimit(t *testing.T) {
	m := NewCrashableMem()
	f := must(m.Create("f"))(t)
	if _, err := f.WriteAt([]byte("x"), MaxMemFileSize); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("WriteAt past the limit: %v", err)
	}
	if err := f.Truncate(MaxMemFileSize + 1); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("Truncate past the limit: %v", err)
	}
	must(f.Seek(math.MaxInt64, io.SeekStart))(t)
	if _, err := f.Write([]byte("x")); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("Write past the limit: %v", err)
	}
	if fi := must(f.Stat())(t); fi.Size() != 0 {
		t.Fatalf("size %d", fi.Size())
	}
}

// A crash ends the process holding a lock: the clone has the lock file (if
// durable) but no lock, while the original stays locked.
func TestMemFSLockCrashClone(t *testing.T) {
	m := NewCrashableMem()
	held := must(m.Lock("d.lock"))(t)
	if err := SyncDir(m, ""); err != nil {
		t.Fatal(err)
	}
	clone := m.CrashClone()
	f, err := clone.Lock("d.lock")
	if err != nil {
		t.Fatalf("Lock in the crash clone: %v", err)
	}
	f.Close()
	if _, err := m.Lock("d.lock"); !errors.Is(err, ErrLocked) {
		t.Fatalf("original: err %v, want ErrLocked", err)
	}
	held.Close()
}
