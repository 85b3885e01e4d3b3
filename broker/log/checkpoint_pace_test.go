package log

import (
	"testing"
	"time"

	"github.com/weirhq/weir/vfs"
)

// ckptState returns the last recovery point written and when.
func ckptState(l *Log) (checkpoint, time.Time) {
	l.ckptFileMu.Lock()
	defer l.ckptFileMu.Unlock()
	return l.lastCkpt, l.lastCkptAt
}

// The periodic checkpoint is paced from the open: right after a new log
// or a reopened one took data, it writes nothing until checkpointMaxAge
// passed (or checkpointBytes were synced) since the open; then it writes
// a recovery point at the synced end, and a crash recovery from it finds
// every synced batch.
func TestCheckpointPacedFromOpen(t *testing.T) {
	fs := vfs.NewCrashableMem()
	opts := Options{FS: fs, Dir: "/data/p-0"}
	for round := range 2 {
		l := mustOpen(t, opts)
		before, _ := ckptState(l)
		res := mustAppend(t, l, testBatch{records: 3, valueSize: 100, firstTs: time.Now().UnixMilli()}.build(), true)
		if err := l.checkpoint(false); err != nil {
			t.Fatal(err)
		}
		if got, _ := ckptState(l); got != before {
			t.Fatalf("round %d: checkpoint written right after the open: %+v, was %+v", round, got, before)
		}
		// checkpointMaxAge later: due.
		l.ckptFileMu.Lock()
		l.lastCkptAt = l.lastCkptAt.Add(-checkpointMaxAge)
		l.ckptFileMu.Unlock()
		if err := l.checkpoint(false); err != nil {
			t.Fatal(err)
		}
		got, _ := ckptState(l)
		if got.next != res.LastOffset+1 || got.pos <= before.pos || got.clean {
			t.Fatalf("round %d: checkpoint after checkpointMaxAge: %+v, want next %d past pos %d", round, got, res.LastOffset+1, before.pos)
		}
		if round == 0 {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// A crash now: recovery starts from that point and keeps all.
		crashed := fs.CrashClone()
		l.Close()
		l2 := mustOpen(t, Options{FS: crashed, Dir: opts.Dir})
		if n := len(readAll(t, l2, 0)); n != 2 || l2.LogEndOffset() != 6 {
			t.Fatalf("after the crash: %d batches, log end %d, want 2 and 6", n, l2.LogEndOffset())
		}
		l2.Close()
	}
}
