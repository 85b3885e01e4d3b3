package nexmark

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/weirtest"
)

// The stateful unwindowed queries under ExactlyOnce, killed with SIGKILL
// mid-stream and restarted, as the windowed ones (same child role: one
// App per query, Run, then a bounded restart on the same state
// directories). q3 emits each join result once (its output is compared as
// a multiset: a result twice fails); q4 and q6 aggregate closed auctions,
// so a record applied twice to their state — a replay after the crash
// that the restored state already counted — would leave a wrong average
// as the latest row of some key.
func TestStatefulQueriesKill9ExactlyOnce(t *testing.T) {
	queries := []string{"q3", "q4", "q6"}
	es := windowedEvents(t)
	const parts = 3
	b := weirtest.Start(t, weirtest.Topic("events", parts))
	for _, q := range queries {
		b.CreateTopic(q+"-kill", parts)
	}
	dir := t.TempDir()
	env := func(mode string) []string {
		return []string{killBrokerEnv + "=" + b.Addr(), killDirEnv + "=" + dir, killInputEnv + "=events",
			killQueriesEnv + "=" + strings.Join(queries, ","), killModeEnv + "=" + mode}
	}
	first := weirtest.StartChild(t, killChildRole, env("run")...)

	// Half the events, then wait until every query committed results,
	// then kill the child two chunks later, while it processes.
	const chunk = 400
	waitAt := len(es) / 2 / chunk * chunk
	killAt := waitAt + 2*chunk
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	producer := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	before := map[string]int{}
	for i := 0; i < len(es); i += chunk {
		if err := WriteEvents(ctx, producer, "events", es[i:min(i+chunk, len(es))], parts); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if i == waitAt {
			deadline := time.Now().Add(90 * time.Second)
			for _, q := range queries {
				for committedCount(t, b, q+"-kill") == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%s: no committed result within 90s; the child's log:\n%s", q, first.Logs())
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
		if i == killAt {
			first.Kill()
			for _, q := range queries {
				before[q] = committedCount(t, b, q+"-kill")
			}
			t.Logf("killed after %d of %d events were produced; committed records per query: %v", i+chunk, len(es), before)
		}
	}
	second := weirtest.StartChild(t, killChildRole, env("bounded")...)
	select {
	case <-second.Done():
		if err := second.Err(); err != nil {
			t.Fatalf("bounded restart: %v; its log:\n%s", err, second.Logs())
		}
	case <-time.After(180 * time.Second):
		t.Fatalf("bounded restart did not end within 180s; its log:\n%s", second.Logs())
	}
	for _, q := range queries {
		out, err := ReadTopic(ctx, q+"-kill", kgo.SeedBrokers(b.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(q, es, out); err != nil {
			t.Errorf("after kill -9 and restart: %v", err)
			continue
		}
		if before[q] >= len(out) {
			t.Errorf("%s: all %d records were out before the kill: the restart was not tested", q, len(out))
		}
		t.Logf("%s: %d records (%d committed before the kill)", q, len(out), before[q])
	}
}
