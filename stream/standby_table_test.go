package stream

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream/internal/state"
)

// TestStandbyOfTable: a standby of a task with a table store keeps its copy
// from the table's source topic (a table has no changelog topic of its own)
// and applies what processing would: a record without a key is skipped.
func TestStandbyOfTable(t *testing.T) {
	b := startBroker(t)
	b.createTopic("orders", 1)
	b.createTopic("customers", 1)
	bl := NewBuilder()
	shopTopology(bl)
	a, err := NewApp("tbl", bl, Brokers(b.seeds...), StateDir(t.TempDir()), CommitInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	a.adm = b.adm
	b.produce(
		&kgo.Record{Topic: "customers", Key: []byte("c1"), Value: []byte("ann")},
		&kgo.Record{Topic: "customers", Value: []byte("no key")},
		&kgo.Record{Topic: "customers", Key: []byte("c2"), Value: []byte("bob")},
	)
	spec := a.stores["customers"]
	ctx, cancel := context.WithCancel(context.Background())
	st := &standbyTask{id: a.storeTask(spec, 0), stores: []*storeSpec{spec}, cancel: cancel,
		done: make(chan struct{}), pos: map[string]int64{}}
	errc := make(chan error, 1)
	go func() {
		defer close(st.done)
		errc <- a.standbys.tail(ctx, st)
	}()
	deadline := time.Now().Add(time.Minute)
	for st.positions()["customers"] < 3 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("standby at %v, source topic end 3", st.positions())
		}
		select {
		case err := <-errc:
			t.Fatalf("standby stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-st.done
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(a.taskDir(st.id), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string]string{}
	if err := db.Scan("customers", nil, nil, func(k, v []byte, _ int64) error {
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["c1"] != "ann" || got["c2"] != "bob" {
		t.Fatalf("standby copy %v, want c1=ann c2=bob", got)
	}
}
