package stream

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A windowed count killed with SIGKILL mid-stream and restarted on its
// state directory: under ExactlyOnce every window's final result is
// committed exactly once and equals the batch answer; under AtLeastOnce
// none is missing. The App runs in a child process (this test binary,
// re-executed in the "window" child role).

// windowKillTopology: tumbling 1 s windows of "wevents" (hopping: 1 s
// advancing 200 ms, in pane layout), counted, finals to "wcounts".
func windowKillTopology(bl *Builder, hopping bool) {
	in := From(bl, "wevents", String(), String())
	w := Tumbling(time.Second)
	if hopping {
		w = Hopping(time.Second, 200*time.Millisecond)
	}
	WindowedCount(GroupByKey(in), w,
		WindowedStore{Name: "wc", Late: DropLate(), Emit: EmitFinal()}).
		ToStream().To("wcounts", TimeWindowed(String(), time.Second), Int64())
}

// windowKillHoppingEnv set to 1 makes the "window" child role's windows
// hopping.
const windowKillHoppingEnv = "WEIR_TEST_WINDOW_KILL_HOPPING"

// runWindowKillChild is the "window" child role: windowKillTopology as app
// "wcrashy".
func runWindowKillChild() int {
	bl := NewBuilder()
	windowKillTopology(bl, os.Getenv(windowKillHoppingEnv) == "1")
	return runChildApp("wcrashy", bl)
}

// produceWindowEvents writes records from..from+n-1 of the test's stream:
// key i%12, event time t0 + 50 ms * i (in order per partition), and adds
// them to recs.
func produceWindowEvents(b *testBroker, from, n int, recs *[]wrec) {
	out := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("k%02d", i%12)
		ts := t0.UnixMilli() + 50*int64(i)
		*recs = append(*recs, wrec{key: k, ts: ts})
		out = append(out, &kgo.Record{Topic: "wevents", Key: []byte(k), Value: []byte("x"), Timestamp: time.UnixMilli(ts)})
	}
	b.produce(out...)
}

// readWindowResults reads "wcounts": the results per window, in order.
func readWindowResults(t testing.TB, b *testBroker, committed bool) map[string][]int64 {
	t.Helper()
	kc := TimeWindowed(String(), time.Second)
	got := map[string][]int64{}
	for _, r := range b.read("wcounts", committed) {
		k, err := kc.Decode(r.Key)
		if err != nil {
			t.Fatal(err)
		}
		n, err := Int64().Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		w := wkey(k.Key, k.Start.UnixMilli(), k.End.UnixMilli())
		got[w] = append(got[w], n)
	}
	return got
}

func TestWindowKill9FinalResults(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) { windowKill9(t, g, false) })
	}
}

// The same with hopping windows in pane layout: a window's final result
// combines panes written before and after the kill.
func TestWindowKill9HoppingPanes(t *testing.T) {
	for _, g := range []Guarantee{ExactlyOnce, AtLeastOnce} {
		t.Run(g.String(), func(t *testing.T) { windowKill9(t, g, true) })
	}
}

func windowKill9(t *testing.T, g Guarantee, hopping bool) {
	var env []string
	adv := int64(1000)
	if hopping {
		env, adv = []string{windowKillHoppingEnv + "=1"}, 200
	}
	b := startBrokerOn(t, weirBroker)
	b.createTopic("wevents", 3)
	b.createTopic("wcounts", 3)
	dir := t.TempDir()
	committed := g == ExactlyOnce
	var recs []wrec
	first := startKillChild(t, "window", b, g, dir, env...)
	// Produce 60 s of event time in chunks while the App runs;
	// kill it once some finals are out, while records still come.
	for i := 0; i < 1200; i += 20 {
		produceWindowEvents(b, i, 20, &recs)
		time.Sleep(5 * time.Millisecond)
		if i == 400 {
			deadline := time.Now().Add(60 * time.Second)
			for len(readWindowResults(t, b, committed)) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no finals within 60s; the App's log:\n%s", first.Logs())
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		if i == 600 {
			t.Logf("killed with %d windows out", len(readWindowResults(t, b, committed)))
			first.Kill()
		}
	}
	// Records far in event time on every partition close every
	// window (their own stay open).
	var sentinels []*kgo.Record
	for p := int32(0); p < 3; p++ {
		sentinels = append(sentinels, &kgo.Record{Topic: "wevents", Key: []byte(sentinelKey(p, 3)),
			Value: []byte("x"), Timestamp: t0.Add(time.Hour)})
	}
	b.produce(sentinels...)
	second := startKillChild(t, "window", b, g, dir, env...)
	want := batchTime(recs, 1000, adv, 0, true)
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := readWindowResults(t, b, committed)
		missing := 0
		for w := range want {
			if len(got[w]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			for w, n := range want {
				vs := got[w]
				if committed && (len(vs) != 1 || vs[0] != n) {
					t.Fatalf("window %s: results %v under ExactlyOnce, want exactly [%d]", w, vs, n)
				}
			}
			for w, vs := range got {
				if _, ok := want[w]; !ok && w[0] != '~' {
					t.Fatalf("unexpected window %s: %v", w, vs)
				}
			}
			t.Logf("%s: %d windows, every one present; after the restart", g, len(want))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d windows missing after 90s; the App's log:\n%s", missing, len(want), second.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
