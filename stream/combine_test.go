package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCombineRoundsMergesPerRound: the records of a round that share a key
// leave as one record at the round's end (value folded in order, largest
// timestamp, first-key order); nothing is held into the next round; a
// record that fails in another operator leaves nothing in the merge, nor
// does a round that aborts.
func TestCombineRoundsMergesPerRound(t *testing.T) {
	b := NewBuilder()
	in := MapValues(From(b, "in", String(), String()), func(r Record[string, string]) (int64, error) {
		return strconv.ParseInt(r.Value, 10, 64)
	})
	CombineRounds(in, func(a, b int64) (int64, error) { return a + b, nil }).To("out", String(), Int64())
	// A second consumer of the same records, failing on 99: that record is
	// retried and dead-lettered, and must not count in the merge.
	in.Filter(func(r Record[string, int64]) (bool, error) {
		if r.Value == 99 {
			return false, errors.New("bad value")
		}
		return false, nil
	}).To("never", String(), Int64())
	h := newHarness(t, b)
	tk := h.task("in", 0)
	t0 := time.UnixMilli(1_000_000)
	var off int64
	type rec struct {
		key   string
		value int64
		ts    int64 // seconds after t0
	}
	round := func(kvs ...string) []rec {
		t.Helper()
		before := len(h.topic("out"))
		for i := 0; i < len(kvs); i += 2 {
			// Timestamps go down within a round: the merged one is the
			// largest, not the last.
			r := &kgo.Record{Topic: "in", Key: []byte(kvs[i]), Value: []byte(kvs[i+1]), Offset: off,
				Timestamp: t0.Add(time.Duration(100-off) * time.Second)}
			off++
			if err := tk.handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(h.topic("out")); n != before {
			t.Fatalf("%d records out before the round's end, want %d", n, before)
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
		if err := tk.flushState(); err != nil {
			t.Fatal(err)
		}
		var got []rec
		for _, r := range h.topic("out")[before:] {
			got = append(got, rec{string(r.Key), int64(binary.BigEndian.Uint64(r.Value)), int64(r.Timestamp.Sub(t0) / time.Second)})
		}
		return got
	}
	check := func(got, want []rec) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("got %v, want %v", got, want)
			}
		}
	}
	check(round("b", "1", "a", "2", "b", "3", "a", "99", "b", "4", "c", "5"),
		[]rec{{"b", 8, 100}, {"a", 2, 99}, {"c", 5, 95}})
	check(round("a", "7"), []rec{{"a", 7, 94}})
	check(round(), nil)
	// A round cut short by an abort: its records are fetched and handled
	// again, and the merge must not hold them twice.
	for _, v := range []string{"10", "20"} {
		r := &kgo.Record{Topic: "in", Key: []byte("a"), Value: []byte(v), Offset: off, Timestamp: t0}
		if err := tk.handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	tk.abortRound()
	check(round("a", "10", "a", "20"), []rec{{"a", 30, 93}})
	if n := len(h.topic(DLQTopic("app"))); n != 1 {
		t.Fatalf("%d dead letters, want 1 (the record of 99)", n)
	}
}
