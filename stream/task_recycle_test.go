package stream

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func recycleTopology(b *Builder) {
	in := From(b, "in", String(), String())
	Count(GroupByKey(in, String(), String()), StoreConfig{Name: "c", TTL: time.Hour}).To("out", String(), Int64())
}

// With the real client as producer, a record whose promise ran is handed out
// again by newRecord, emptied; a producer that keeps records (tests, the
// Driver) never sees one of its records reused.
func TestRecordsRecycledOnlyWithTheClient(t *testing.T) {
	h := newHarness(t, builtWith(recycleTopology))
	for i := range 200 {
		h.feed("in", 0, key(i%7), "v", t0.Add(time.Duration(i)*time.Millisecond))
	}
	seen := map[*kgo.Record]bool{}
	for _, r := range h.out {
		if seen[r] {
			t.Fatalf("record %p produced twice: reused while the producer keeps it", r)
		}
		seen[r] = true
		if r.Topic == "" {
			t.Fatalf("a kept record was emptied: %+v", r)
		}
	}

	var held *kgo.Record
	client := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		held = r
		promise(r, nil)
	}, true)
	tk := newHarness(t, builtWith(recycleTopology), client).task("in", 0)
	tk.produce(tk.newRecord())
	if held == nil {
		t.Fatal("nothing produced")
	}
	held.Topic, held.Value = "x", []byte("v")
	tk.onProduced(held, nil)
	if got := tk.newRecord(); got != held {
		t.Fatalf("newRecord = %p, want the recycled %p", got, held)
	} else if got.Topic != "" || got.Value != nil {
		t.Fatalf("recycled record not emptied: %+v", got)
	}
	// The bound: records past maxRecycled are left to the collector.
	for range maxRecycled + 10 {
		tk.recycle(&kgo.Record{})
	}
	tk.clMu.Lock()
	n := len(tk.recycled)
	tk.clMu.Unlock()
	if n != maxRecycled {
		t.Fatalf("kept %d recycled records, want the bound %d", n, maxRecycled)
	}
}

// builtWith returns a new builder with build applied.
func builtWith(build func(*Builder)) *Builder {
	b := NewBuilder()
	build(b)
	return b
}
