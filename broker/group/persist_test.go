package group

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// openOffsetsLog opens the offsets partition on fs the way the broker does
// (compacted, group-commit fsync).
func openOffsetsLog(t *testing.T, fs vfs.FS) *wlog.Log {
	t.Helper()
	l, err := wlog.Open(wlog.Options{FS: fs, Dir: "data/__consumer_offsets-0", Config: wlog.Config{Compact: true}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newWlogCoordinator(t *testing.T, l *wlog.Log, topics *fakeTopics, clk *fakeClock) *Coordinator {
	t.Helper()
	c, err := NewCoordinator(Options{Offsets: l, Topics: topics, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCrashKeepsAcknowledgedCommits commits offsets from several
// goroutines on a real log over the crashable MemFS and takes crash
// snapshots (with torn writes and unsynced directory entries) while they
// run. After recovery from each snapshot: every commit acknowledged before
// the snapshot is there (or a later one of the same partition), and every
// offset visible was really committed — a commit is never half there.
func TestCrashKeepsAcknowledgedCommits(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openOffsetsLog(t, fs)
	topics := newFakeTopics(map[string]int32{"t": 4})
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newWlogCoordinator(t, l, topics, clk)

	// Writer w commits offsets 1, 2, 3, ... to partition w of group "g".
	var mu sync.Mutex
	acked := map[int32]int64{} // highest acknowledged per partition
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range int32(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(1); off <= 400; off++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Handle(t.Context(), commitReq("g", "", -1, "t", map[int32]int64{w: off}))
				if err != nil {
					t.Error(err)
					return
				}
				if code := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
					t.Errorf("commit: %v", kerr.ErrorForCode(code))
					return
				}
				mu.Lock()
				acked[w] = off
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 7))
	type snap struct {
		fs    *vfs.MemFS
		acked map[int32]int64
	}
	var snaps []snap
	// Snapshot whenever another 250 commits were acknowledged (bounded
	// wait), so the snapshots fall in the middle of the run.
	for k := 1; k <= 5; k++ {
		var before map[int32]int64
		for range 20000 {
			mu.Lock()
			sum := int64(0)
			for _, v := range acked {
				sum += v
			}
			if sum >= int64(250*k) {
				before = map[int32]int64{}
				for p, v := range acked {
					before[p] = v
				}
			}
			mu.Unlock()
			if before != nil {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		if before == nil {
			t.Fatalf("commits stalled before snapshot %d", k)
		}
		snaps = append(snaps, snap{fs.CrashCloneWith(vfs.CrashOptions{Rand: rng, TornWrites: true, UnsyncedEntries: true}), before})
	}
	close(stop)
	wg.Wait()
	c.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range snaps {
		l2 := openOffsetsLog(t, s.fs)
		c2 := newWlogCoordinator(t, l2, topics, clk)
		h := &harness{t: t, c: c2}
		got := h.fetched("g")["g"]
		t.Logf("snapshot %d: acknowledged %v, recovered %v", i, s.acked, got)
		for p, want := range s.acked {
			if got[tp{"t", p}] < want {
				t.Errorf("snapshot %d: partition %d has %d, acknowledged %d", i, p, got[tp{"t", p}], want)
			}
		}
		for k, v := range got {
			if v < 1 || v > 400 || k.topic != "t" {
				t.Errorf("snapshot %d: impossible offset %v=%d", i, k, v)
			}
		}
		c2.Close()
		l2.Close()
	}
}

// TestCommitOnClosedLogFails: a commit whose append fails is answered
// with an error, is not visible, and does not survive a crash.
func TestCommitOnClosedLogFails(t *testing.T) {
	fs := vfs.NewCrashableMem()
	l := openOffsetsLog(t, fs)
	topics := newFakeTopics(map[string]int32{"t": 1})
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newWlogCoordinator(t, l, topics, clk)
	defer c.Close()
	h := &harness{t: t, c: c}
	if codes := h.commit(commitReq("g", "", -1, "t", map[int32]int64{0: 5})); codes[0] != 0 {
		t.Fatal(kerr.ErrorForCode(codes[0]))
	}
	l.Close()
	codes := h.commit(commitReq("g", "", -1, "t", map[int32]int64{0: 6}))
	wantCode(t, "commit on a closed log", codes[0], kerr.NotCoordinator)
	if got := h.fetched("g")["g"][tp{"t", 0}]; got != 5 {
		t.Fatalf("offset %d after a failed commit", got)
	}
	l2 := openOffsetsLog(t, fs.CrashClone())
	defer l2.Close()
	c2 := newWlogCoordinator(t, l2, topics, clk)
	defer c2.Close()
	if got := (&harness{t: t, c: c2}).fetched("g")["g"][tp{"t", 0}]; got != 5 {
		t.Fatalf("after crash: %d", got)
	}
}
