package txn

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestConcurrentProducers runs many producers at once (TV1 and TV2,
// commits and aborts, verified appends), each on its own transactional id,
// with the default EndTxn answer point, and checks every transaction ended
// with exactly its markers. Run with -race it exercises the loop, the
// writer's coalescing and the marker goroutines together.
func TestConcurrentProducers(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.EndTxnCompletionWait = 0 })
	const producers, txns = 8, 25
	type key struct {
		tp     TopicPartition
		pid    int64
		epoch  int16
		commit bool
	}
	var mu sync.Mutex
	expected := map[key]int{}
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := 0; p < producers; p++ {
		wg.Go(func() {
			id := fmt.Sprintf("p%d", p)
			tv2 := p%2 == 0
			pid, ep := e.mustInitNoT(id)
			for i := 0; i < txns; i++ {
				parts := []TopicPartition{tpA, tpB, tpC}[:1+(i+p)%3]
				if tv2 {
					codes, release, err := e.c.Verify(t.Context(), id, pid, ep, parts, true)
					release()
					if err != nil || codes[0] != 0 {
						errs <- fmt.Errorf("%s verify: %v %v", id, codes, err)
						return
					}
				} else if code := e.addPartsNoT(id, pid, ep, parts); code != 0 {
					errs <- fmt.Errorf("%s add: %v", id, kerr.ErrorForCode(code))
					return
				}
				commit := (i+p)%4 != 0
				version := int16(3)
				if tv2 {
					version = 5
				}
				resp, err := e.endTxnNoT(id, pid, ep, commit, version)
				if err != nil || resp.ErrorCode != 0 {
					errs <- fmt.Errorf("%s end: %v %v", id, err, kerr.ErrorForCode(resp.ErrorCode))
					return
				}
				markerEpoch := ep
				if tv2 {
					markerEpoch = ep + 1
					ep = resp.ProducerEpoch
				}
				mu.Lock()
				for _, tp := range parts {
					expected[key{tp, pid, markerEpoch, commit}]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := map[key]int{}
	for _, m := range e.parts.all() {
		got[key{m.tp, m.pid, m.epoch, m.commit}]++
	}
	for k, n := range expected {
		if got[k] != n {
			t.Fatalf("marker %+v written %d times, want %d", k, got[k], n)
		}
	}
	if len(got) != len(expected) {
		t.Fatalf("%d distinct markers, want %d", len(got), len(expected))
	}
}
