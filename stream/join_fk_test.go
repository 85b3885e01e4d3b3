package stream

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fkTopology joins rows (key: row id; value "<foreign key>|<payload>") to
// refs (key: ref id; value: a string) on the row's foreign key, inner and
// left; results go to output topics through ToStream.
func fkTopology(b *Builder) {
	rows := FromTable(b, "rows", String(), String(), "rows")
	refs := FromTable(b, "refs", String(), String(), "refs")
	fk := func(_ string, v string) (string, error) { f, _, _ := strings.Cut(v, "|"); return f, nil }
	JoinForeign(rows, fk, refs, StoreConfig{Name: "fk-inner", NoExpiry: "test"},
		func(k, v, ref string) (string, error) { return v + "=" + ref, nil }).ToStream().To("fk-inner", String(), String())
	LeftJoinForeign(rows, fk, refs, StoreConfig{Name: "fk-left", NoExpiry: "test"},
		func(k, v, ref string, found bool) (string, error) {
			if !found {
				ref = "-"
			}
			return v + "=" + ref, nil
		}).ToStream().To("fk-left", String(), String())
}

// batchFKJoins computes both foreign-key joins from scratch.
func batchFKJoins(rows, refs map[string]string) (inner, left map[string]string) {
	inner, left = map[string]string{}, map[string]string{}
	for k, v := range rows {
		f, _, _ := strings.Cut(v, "|")
		if ref, ok := refs[f]; ok {
			inner[k] = v + "=" + ref
			left[k] = v + "=" + ref
		} else {
			left[k] = v + "=-"
		}
	}
	return inner, left
}

// TestForeignKeyJoinMatchesBatch: random updates, foreign-key changes and
// deletions of rows and of the referenced table (rows on 3 partitions, refs
// on 2: not co-partitioned), processing and restarting at random points;
// after every processing each output topic read as a table equals the join
// computed from scratch — in particular no result is left from a row's
// previous foreign key.
func TestForeignKeyJoinMatchesBatch(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 213))
			d := newJoinDriver(t, fkTopology, map[string]int32{"rows": 3, "refs": 2})
			rows, refs := map[string]string{}, map[string]string{}
			check := func() {
				t.Helper()
				if err := d.Process(); err != nil {
					t.Fatal(err)
				}
				inner, left := batchFKJoins(rows, refs)
				for name, want := range map[string]map[string]string{"fk-inner": inner, "fk-left": left} {
					if got := tableOf(d.Records(name)); !maps.Equal(got, want) {
						t.Fatalf("%s:\n got %v\nwant %v", name, got, want)
					}
				}
			}
			ts := t0
			for i := range 600 {
				ts = ts.Add(time.Millisecond)
				var topic, k string
				var v []byte
				if rng.IntN(3) == 0 {
					topic, k = "refs", fmt.Sprint("f", rng.IntN(6))
					if rng.IntN(4) == 0 {
						delete(refs, k)
					} else {
						v = []byte(fmt.Sprint("ref", i))
						refs[k] = string(v)
					}
				} else {
					topic, k = "rows", fmt.Sprint("r", rng.IntN(20))
					if rng.IntN(5) == 0 {
						delete(rows, k)
					} else {
						v = []byte(fmt.Sprintf("f%d|%d", rng.IntN(7), i)) // f6 never exists in refs
						rows[k] = string(v)
					}
				}
				if _, err := d.Pipe(topic, []byte(k), v, ts); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(15) == 0 {
					check()
				}
				if rng.IntN(120) == 0 {
					check()
					if err := d.Restart(); err != nil {
						t.Fatal(err)
					}
				}
			}
			check()
		})
	}
}

// A row whose foreign key changes while the answer for its previous key is
// still on its way (both subscriptions processed before either response)
// ends with the result for its current key only.
func TestForeignKeyChangeDropsStaleResponse(t *testing.T) {
	d := newJoinDriver(t, fkTopology, map[string]int32{"rows": 1, "refs": 1})
	pipe := func(topic, k, v string) {
		if _, err := d.Pipe(topic, []byte(k), []byte(v), t0); err != nil {
			t.Fatal(err)
		}
	}
	pipe("refs", "a", "A")
	pipe("refs", "b", "B")
	pipe("rows", "r", "a|1")
	pipe("rows", "r", "b|2")
	pipe("refs", "a", "A2") // answered only if r still subscribed to a
	if err := d.Process(); err != nil {
		t.Fatal(err)
	}
	if got, want := tableOf(d.Records("fk-inner")), map[string]string{"r": "b|2=B"}; !maps.Equal(got, want) {
		t.Fatalf("fk-inner = %v, want %v", got, want)
	}
	for _, r := range d.Records("fk-inner") {
		if strings.Contains(string(r.Value), "A2") {
			t.Fatalf("a result for the row's previous key: %q", r.Value)
		}
	}
}

// TestForeignKeyJoinOnWeirRestart runs the foreign-key joins as an App on
// weir's broker under ExactlyOnce and AtLeastOnce, with a crash and restart
// in the middle and a second on an empty state directory; the outputs read
// as tables (read_committed under ExactlyOnce) equal the batch joins.
func TestForeignKeyJoinOnWeirRestart(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) {
			b := startBrokerOn(t, weirBroker)
			b.createCompacted("rows", 3)
			b.createCompacted("refs", 2)
			b.createTopic("fk-inner", 3)
			b.createTopic("fk-left", 3)
			committed := g == ExactlyOnce
			rng := rand.New(rand.NewPCG(5, uint64(g)))
			rows, refs := map[string]string{}, map[string]string{}
			produce := fkUpdates(b, rng, 50, rows, refs)
			crashRestartRuns(t, b, "fk", fkTopology, g, rng, produce, func() {
				inner, left := batchFKJoins(rows, refs)
				b.waitTables(committed, 60*time.Second, map[string]map[string]string{"fk-inner": inner, "fk-left": left})
			})
		})
	}
}

// FuzzFKSubscriptions: any bytes in a subscriptions store value give an
// error or a list that encodes back to the same bytes, never a panic; set
// keeps the list sorted and unique.
func FuzzFKSubscriptions(f *testing.F) {
	s := fkSubs{}
	s.set([]byte("k1"), make([]byte, fkHashLen))
	s.set([]byte("k0"), append(make([]byte, fkHashLen-1), 1))
	f.Add(s.encode(), []byte("k2"))
	f.Add([]byte{}, []byte(""))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []byte("x"))
	f.Fuzz(func(t *testing.T, b, key []byte) {
		s, err := decodeFKSubs(b)
		if err != nil {
			return
		}
		if got := s.encode(); string(got) != string(b) {
			t.Fatalf("re-encoded %x, want %x", got, b)
		}
		s.set(key, make([]byte, fkHashLen))
		s.set(key, nil)
		for i := 1; i < len(s.keys); i++ {
			if string(s.keys[i-1]) >= string(s.keys[i]) {
				t.Fatalf("keys out of order: %q then %q", s.keys[i-1], s.keys[i])
			}
		}
		if _, err := decodeFKSubs(s.encode()); err != nil {
			t.Fatalf("a set list does not decode: %v", err)
		}
	})
}

// TestForeignKeyJoinKill9 runs the foreign-key joins in a child process on
// weir's broker under ExactlyOnce, kills it with SIGKILL twice while rows and
// referenced values keep changing, restarts it on its state directory, and
// checks that the committed outputs read as tables equal the batch joins.
func TestForeignKeyJoinKill9(t *testing.T) {
	b := startBrokerOn(t, weirBroker)
	b.createCompacted("rows", 3)
	b.createCompacted("refs", 2)
	b.createTopic("fk-inner", 3)
	b.createTopic("fk-left", 3)
	rng := rand.New(rand.NewPCG(9, 9))
	rows, refs := map[string]string{}, map[string]string{}
	produce := fkUpdates(b, rng, 60, rows, refs)
	dir := t.TempDir()
	env := killChildTopologyEnv + "=fk"
	c := startKillChild(t, "count", b, ExactlyOnce, dir, env)
	for range 2 {
		before := len(b.readCommitted("fk-left"))
		produce(400)
		// Killed while it works: once it committed outputs of this
		// batch, a random moment later.
		b.waitForIso("fk-left", true, 60*time.Second, func(recs []*kgo.Record) bool { return len(recs) > before })
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		c.Kill()
		produce(200)
		c = startKillChild(t, "count", b, ExactlyOnce, dir, env)
	}
	produce(100)
	inner, left := batchFKJoins(rows, refs)
	b.waitTables(true, 90*time.Second, map[string]map[string]string{"fk-inner": inner, "fk-left": left})
}
