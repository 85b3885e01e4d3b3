package nexmark

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) {
	weirtest.RunChildRole(map[string]func() int{killChildRole: runKillChild})
	os.Exit(m.Run())
}

// The windowed queries under ExactlyOnce, killed with SIGKILL mid-stream
// and restarted: a child process (this test binary, re-executed) runs an
// App per query (Run) while the events are being produced; once every
// query has committed final results, and while events still come, it is
// killed; the rest of the events is produced and a new child on the same
// state directories runs the Apps bounded to the end of the input. Each
// query's committed output must then equal its batch reference: every
// final result present, none twice.

const (
	killChildRole = "nexmark-queries"
	// The child's configuration: broker, state root (a directory per
	// query in it), input topic, queries (comma-separated; output topic
	// "<query>-kill"), and "run" or "bounded".
	killBrokerEnv  = "NEXMARK_KILL_BROKER"
	killDirEnv     = "NEXMARK_KILL_DIR"
	killInputEnv   = "NEXMARK_KILL_INPUT"
	killQueriesEnv = "NEXMARK_KILL_QUERIES"
	killModeEnv    = "NEXMARK_KILL_MODE"
)

// runKillChild runs one ExactlyOnce App per query ("kill-<query>"), all at
// once, until SIGTERM (mode run) or to the end of their input (mode
// bounded: exit 0 once every run ended).
func runKillChild() int {
	ctx, stop := weirtest.ChildContext()
	defer stop()
	o := Options{OutOfOrderness: windowedDisorder}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	for _, q := range strings.Split(os.Getenv(killQueriesEnv), ",") {
		bl := stream.NewBuilder()
		if err := Build(bl, q, os.Getenv(killInputEnv), q+"-kill", o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		opts := append(AppOptions(o), stream.Brokers(os.Getenv(killBrokerEnv)),
			stream.StateDir(filepath.Join(os.Getenv(killDirEnv), q)), stream.Delivery(stream.ExactlyOnce))
		a, err := stream.NewApp("kill-"+q, bl, opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if os.Getenv(killModeEnv) == "bounded" {
				err = a.RunBounded(ctx)
			} else {
				err = a.Run(ctx)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", q, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(errs, "\n"))
		return 1
	}
	return 0
}

func TestWindowedQueriesKill9ExactlyOnce(t *testing.T) {
	// Killed once 75% of the events is out (30 s of event time: q11's
	// first sessions close after 25 s) and every query committed final
	// results.
	kill9ExactlyOnce(t, windowedQueries, 3, 4)
}

// kill9ExactlyOnce runs queries in a child process (one ExactlyOnce App
// each) while the events are produced in chunks; once num/den of them is
// out it waits until every query committed results, kills the child
// (SIGKILL) two chunks later, while it processes, produces the rest, and
// runs the queries bounded to the end of the input in a new child on the
// same state directories. Each query's committed output must then pass
// Check against the batch reference, and some of it must have come after
// the restart.
func kill9ExactlyOnce(t *testing.T, queries []string, num, den int) {
	t.Helper()
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

	const chunk = 400
	waitAt := len(es) * num / den / chunk * chunk
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
			t.Logf("killed after %d of %d events were produced; committed results per query: %v", i+chunk, len(es), before)
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
			t.Errorf("%s: all %d results were out before the kill: the restart was not tested", q, len(out))
		}
		t.Logf("%s: %d results (%d committed before the kill)", q, len(out), before[q])
	}
}
