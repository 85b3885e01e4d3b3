package stream

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A stream-stream outer join killed with SIGKILL mid-stream and restarted
// on its state directory, on the weir broker: under ExactlyOnce every
// result (joined pairs and unmatched records of both sides) is committed
// exactly once and the results equal the batch join; under AtLeastOnce none
// is missing. The App runs in a child process (this test binary,
// re-executed in the "join" child role).

// joinKillWait bounds the wait for the results after the restart.
var joinKillWait = 90 * time.Second

const (
	joinKillBefore = 150 // ms
	joinKillAfter  = 100 // ms
)

// joinKillRekeyEnv, if set, makes the child re-key "jleft" (its records
// keyed by their name, the join key in the value: "<key>/<name>") before
// the join, which then reads it through a repartition topic.
const joinKillRekeyEnv = "STREAM_JOIN_KILL_REKEY"

// joinKillTopology: "jleft" outer-joined to "jright" (3 partitions each)
// within [t - 150ms, t + 100ms], results to "jout".
func joinKillTopology(bl *Builder, rekey bool) {
	l := From(bl, "jleft", String(), String())
	if rekey {
		l = KeyBy(l, func(r Record[string, string]) (string, error) {
			k, _, _ := strings.Cut(r.Value, "/")
			return k, nil
		})
	}
	r := From(bl, "jright", String(), String())
	OuterJoinStreams(l, r, JoinWindows{Before: joinKillBefore * time.Millisecond, After: joinKillAfter * time.Millisecond},
		JoinStore{Name: "jw", Late: DropLate()},
		func(_ string, lv string, lok bool, rv string, rok bool) (string, error) {
			return joinValue(lv, lok, rv, rok), nil
		}).To("jout", String(), String())
}

// runJoinKillChild is the "join" child role: joinKillTopology as app
// "jcrashy".
func runJoinKillChild() int {
	bl := NewBuilder()
	joinKillTopology(bl, os.Getenv(joinKillRekeyEnv) != "")
	return runChildApp("jcrashy", bl)
}

// produceJoinEvents writes records from..from+n-1 of the test's streams:
// record i on a random side, key k<i%5>, event time t0 + 20 ms * i (in
// order on every partition of both topics), and adds them to recs.
func produceJoinEvents(b *testBroker, rng *rand.Rand, from, n int, recs *[]jrec, rekey bool) {
	out := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		side := rng.IntN(2)
		rec := jrec{side: side, key: fmt.Sprintf("k%d", i%5), ts: t0.UnixMilli() + 20*int64(i),
			val: fmt.Sprintf("%c%d", "lr"[side], i)}
		*recs = append(*recs, rec)
		key, val := rec.key, rec.val
		if rekey && side == 0 {
			key, val = rec.val, rec.key+"/"+rec.val
		}
		out = append(out, &kgo.Record{Topic: []string{"jleft", "jright"}[side], Key: []byte(key),
			Value: []byte(val), Timestamp: time.UnixMilli(rec.ts)})
	}
	b.produce(out...)
}

// readJoinResults reads "jout" (sentinel keys left out): how many times
// each result was written (re-keyed left values named by their name).
func readJoinResults(b *testBroker, committed bool) map[string]int {
	got := map[string]int{}
	for _, r := range b.read("jout", committed) {
		if strings.HasPrefix(string(r.Key), "~") {
			continue
		}
		got[jout(string(r.Key), stripKeys(string(r.Value)), r.Timestamp.UnixMilli())]++
	}
	return got
}

func TestJoinStreamsKill9(t *testing.T) {
	for _, tc := range []struct {
		g     Guarantee
		rekey bool
	}{{ExactlyOnce, false}, {AtLeastOnce, false}, {ExactlyOnce, true}} {
		g := tc.g
		name := g.String()
		var env []string
		if tc.rekey {
			name += "-repartitioned"
			env = append(env, joinKillRekeyEnv+"=1")
		}
		t.Run(name, func(t *testing.T) {
			b := startBrokerOn(t, weirBroker)
			for _, topic := range []string{"jleft", "jright", "jout"} {
				b.createTopic(topic, 3)
			}
			dir := t.TempDir()
			committed := g == ExactlyOnce
			rng := rand.New(rand.NewPCG(15, 9))
			var recs []jrec
			first := startKillChild(t, "join", b, g, dir, env...)
			// 24 s of event time in chunks while the App runs; kill it
			// once results are out, while records still come.
			for i := 0; i < 1200; i += 20 {
				produceJoinEvents(b, rng, i, 20, &recs, tc.rekey)
				time.Sleep(5 * time.Millisecond)
				if i == 400 {
					deadline := time.Now().Add(60 * time.Second)
					for len(readJoinResults(b, committed)) == 0 {
						if time.Now().After(deadline) {
							t.Fatalf("no results within 60s; the App's log:\n%s", first.Logs())
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
				if i == 600 {
					t.Logf("killed with %d results out", len(readJoinResults(b, committed)))
					first.Kill()
				}
			}
			// Records far in event time on every partition of both
			// topics close every window (their own stay open).
			var sentinels []*kgo.Record
			for p := int32(0); p < 3; p++ {
				for _, topic := range []string{"jleft", "jright"} {
					sentinels = append(sentinels, &kgo.Record{Topic: topic, Key: []byte(sentinelKey(p, 3)),
						Value: []byte("~"), Timestamp: t0.Add(time.Hour)})
				}
			}
			b.produce(sentinels...)
			second := startKillChild(t, "join", b, g, dir, env...)
			want := batchJoin(recs, joinOuter, joinKillBefore, joinKillAfter)
			pairs := 0
			for _, w := range want {
				if !strings.Contains(w, "-") {
					pairs++
				}
			}
			if pairs < 200 || len(want)-pairs < 50 {
				t.Fatalf("the batch join has %d pairs and %d unmatched: too few of either to prove anything",
					pairs, len(want)-pairs)
			}
			deadline := time.Now().Add(joinKillWait)
			for {
				got := readJoinResults(b, committed)
				missing := 0
				var some []string
				for _, w := range want {
					if got[w] == 0 {
						missing++
						if len(some) < 5 {
							some = append(some, w)
						}
					}
				}
				if missing == 0 {
					var extra []string
					dups := 0
					for r, n := range got {
						dups += n - 1
						if !slices.Contains(want, r) {
							extra = append(extra, r)
						} else if committed && n != 1 {
							t.Fatalf("result %s written %d times under ExactlyOnce, want once", r, n)
						}
					}
					if len(extra) > 0 {
						t.Fatalf("%d results not in the batch join, e.g. %v", len(extra), extra[:min(5, len(extra))])
					}
					if tc.rekey && len(b.read("jcrashy-jw-left-repartition", committed)) == 0 {
						t.Fatal("re-keyed, yet nothing written to jcrashy-jw-left-repartition")
					}
					t.Logf("%s: %d results (%d pairs) of %d records, every one present after the restart; "+
						"%d duplicates", name, len(want), pairs, len(recs), dups)
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d results missing after %v (e.g. %v); the App's log:\n%s", missing, len(want), joinKillWait, some,
						second.Logs())
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
