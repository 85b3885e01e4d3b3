package stream

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A session grows by one record a round, each record replacing the
// session's window (deleted, a wider one created), in committed rounds and
// in rounds that abort and are redone, with no flush of the store cache to
// Pebble: the operator's notes of committed windows Pebble does not hold
// stay about as many as the live sessions, not one per record (also within
// one transaction over many rounds), and the results count every record
// once.
func TestWindowSessionNotesStaySmall(t *testing.T) {
	bl := NewBuilder()
	w := Session(time.Second)
	WindowedCount(GroupByKey(From(bl, "in", String(), Int64())), w,
		WindowedStore{Name: "s", Late: DropLate(), Emit: EmitFinal()}).
		ToStream().To("out", WindowedKeys(String(), w), Int64())
	got := map[string]int64{}
	emitted := 0
	capture := withProducer(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if r.Topic == "out" {
			k, err := WindowedKeys(String(), w).Decode(r.Key)
			v, verr := Int64().Decode(r.Value)
			if err == nil && verr == nil && k.Key != "~" {
				got[wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli())] = v
				emitted++
			}
		}
		promise(r, nil)
	}, false)
	a, err := NewApp("notes", bl, Brokers("127.0.0.1:1"), StateDir(t.TempDir()), capture, Watermarks(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := a.newTask(taskID{sub: 0, partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.close()
	op, ok := tk.timed[0].(interface {
		pendingNotes() int
		txnNotes() int
	})
	if !ok {
		t.Fatalf("timed operator %T is not the windowed one", tk.timed[0])
	}
	ctx := context.Background()
	off := int64(0)
	keys := []string{"a", "b", "c"}
	round := func(ms int64) {
		t.Helper()
		for _, k := range keys {
			r := &kgo.Record{Topic: "in", Key: []byte(k), Value: int64Bytes(1), Offset: off, Timestamp: time.UnixMilli(ms)}
			off++
			if err := tk.handle(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := tk.endBatch(); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 60
	last := int64(0)
	for i := range rounds {
		ms := 1000 + int64(i)*10
		if i%7 == 3 { // a round that aborts, then is redone
			tk.beginRound()
			start := off
			round(ms)
			tk.abortRound()
			off = start
		}
		round(ms)
		if err := tk.flushState(); err != nil {
			t.Fatal(err)
		}
		last = ms
		if n := op.pendingNotes(); n > 2*len(keys) {
			t.Fatalf("round %d: %d pending window notes for %d live sessions", i, n, len(keys))
		}
	}
	// One transaction over many rounds (ExactlyOnce): aborted once, then
	// redone and committed.
	const long = 30
	for attempt := range 2 {
		tk.beginRound()
		start := off
		for i := range long {
			ms := 1000 + int64(rounds+i)*10
			round(ms)
			last = ms
			if n := op.txnNotes(); n > 8*len(keys) {
				t.Fatalf("attempt %d, round %d of a transaction: %d window notes for %d live sessions", attempt, i, n, len(keys))
			}
		}
		if attempt == 0 {
			tk.abortRound()
			off = start
		}
	}
	if err := tk.flushState(); err != nil {
		t.Fatal(err)
	}
	if f := tk.db.Flushes(); f != 0 {
		t.Fatalf("the store cache was flushed %d times; the test needs none", f)
	}
	r := &kgo.Record{Topic: "in", Key: []byte("~"), Value: int64Bytes(1), Offset: off, Timestamp: time.UnixMilli(100_000)}
	if err := tk.handle(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := tk.endBatch(); err != nil {
		t.Fatal(err)
	}
	if err := tk.flushState(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, k := range keys {
		want[wkey(k, 1000, last)] = rounds + long
	}
	if d := diffResults(got, want); d != "[]" || emitted != len(keys) {
		t.Fatalf("%d results: %s", emitted, d)
	}
}
