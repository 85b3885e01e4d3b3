package surge

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/stream"
	"github.com/weirhq/weir/weirtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestEndToEndOnWeir runs the App (at-least-once, consumer group, internal
// topics created by the App) against a real in-process weir broker, feeds it
// a generated stream and waits until every zone on the output topic matches
// the model. Without a crash at-least-once delivers every record exactly
// once, so the counts are exact; then the App stops gracefully with its
// offsets committed (no lag left on any input).
func TestEndToEndOnWeir(t *testing.T) { endToEnd(t, stream.AtLeastOnce) }

// TestEndToEndOnWeirExactlyOnce is the same under ExactlyOnce: every round
// is a transaction on weir's broker, and the output is read read_committed.
func TestEndToEndOnWeirExactlyOnce(t *testing.T) { endToEnd(t, stream.ExactlyOnce) }

func endToEnd(t *testing.T, g stream.Guarantee) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := weirtest.Start(t)
	if err := CreateTopics(ctx, b.Admin(), 3); err != nil {
		t.Fatal(err)
	}
	builder := stream.NewBuilder()
	Build(builder, Config{})
	app, err := stream.NewApp(AppID, builder, stream.Brokers(b.Addr()), stream.StateDir(t.TempDir()),
		stream.CommitInterval(100*time.Millisecond), stream.Workers(2), stream.Delivery(g),
		stream.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()

	events := generate(11, 30, 1500)
	recs := make([]*kgo.Record, len(events))
	for i, e := range events {
		recs[i] = e.Record()
	}
	if err := b.Client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wantReq, wantDrv := model(events)

	board := NewBoard()
	cl := b.Client(kgo.ConsumeTopics(SurgeTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	matches := func() bool {
		got := map[string]ZoneStats{}
		for _, z := range board.Snapshot() {
			got[z.Zone] = z
		}
		for _, zone := range Zones() {
			if got[zone].Requests != wantReq[zone] || got[zone].Drivers != wantDrv[zone] {
				return false
			}
		}
		return true
	}
	for !matches() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("output never matched the model: board %+v, want requests %v drivers %v",
				board.Snapshot(), wantReq, wantDrv)
		}
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := board.Apply(r); err != nil {
				t.Fatal(err)
			}
		})
	}

	stopApp()
	select {
	case err := <-appDone:
		if err != nil {
			t.Fatalf("app.Run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("app did not stop")
	}
	lags, err := b.Admin().Lag(ctx, AppID)
	if err != nil {
		t.Fatal(err)
	}
	if len(lags) != 1 {
		t.Fatalf("lag of %d groups, want the app's", len(lags))
	}
	for _, l := range lags {
		if err := l.Error(); err != nil {
			t.Fatal(err)
		}
		for topic, ps := range l.Lag {
			for p, ml := range ps {
				// Under ExactlyOnce the last offset of a partition is the
				// transaction's commit marker, which the committed offset
				// (last record + 1) does not cover: lag 1 is caught up.
				maxLag := int64(0)
				if g == stream.ExactlyOnce {
					maxLag = 1
				}
				if ml.Err != nil {
					t.Errorf("after a graceful stop %s/%d: %v", topic, p, ml.Err)
					continue
				}
				if ml.Lag <= maxLag {
					continue
				}
				// Beyond the committed offset only watermark markers may
				// remain: an upstream task sends them on the processing
				// clock, also in the App's last round, which no later
				// round reads. Data left behind fails.
				if data := uncommittedData(ctx, t, b, topic, p, ml.Commit.At, ml.End.Offset); data > 0 {
					t.Errorf("after a graceful stop %s/%d has lag %d with %d data records", topic, p, ml.Lag, data)
				}
			}
		}
		for _, topic := range []string{RequestsTopic, DriversTopic, AppID + "-zone-stats-repartition"} {
			if _, ok := l.Lag[topic]; !ok {
				t.Errorf("group %s committed nothing for %s", AppID, topic)
			}
		}
	}
}

// TestRunDemo runs the demo as `weir dev` does, for a fixed duration, and
// checks the output: the guarantee statement, then tables, and a final
// table whose request counts add up to every request the generator produced
// (RunDemo waits for the App to catch up before the final table).
func TestRunDemo(t *testing.T) {
	b := weirtest.Start(t)
	var out strings.Builder
	err := RunDemo(context.Background(), DemoOptions{Brokers: []string{b.Addr()}, StateDir: t.TempDir(),
		Rate: 200, Seed: 1, Duration: 1500 * time.Millisecond, Refresh: 200 * time.Millisecond, Out: &out})
	if err != nil {
		t.Fatalf("RunDemo: %v\n%s", err, out.String())
	}
	text := out.String()
	if !strings.HasPrefix(text, "app surge (at-least-once)\n") {
		t.Fatalf("output does not start with the guarantee statement:\n%s", text)
	}
	final := text[strings.LastIndex(text, "\n\n")+2:]
	lines := strings.Split(strings.TrimSpace(final), "\n")
	var produced int64
	if _, err := fmt.Sscanf(lines[0][strings.Index(lines[0], "  ")+2:], "%d requests,", &produced); err != nil ||
		!strings.HasSuffix(lines[0], "final") {
		t.Fatalf("final status line %q: %v", lines[0], err)
	}
	var counted int64
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("table line %q: %v", l, err)
		}
		counted += n
	}
	if len(lines[2:]) != len(Zones()) || produced < 100 || counted != produced {
		t.Fatalf("final table: %d zones, %d requests counted, %d produced:\n%s", len(lines[2:]), counted, produced, final)
	}
	t.Logf("\n%s", final)
}

// TestBrokerCrashAtLeastOnce cuts the broker's power twice while the App
// processes a generated stream (weirtest.CrashRestart: only fsynced data
// survives, every connection is cut). The App keeps running through it and,
// at-least-once, loses nothing: every zone ends with at least as many
// requests as were produced (more if a replay counted some twice).
func TestBrokerCrashAtLeastOnce(t *testing.T) { brokerCrash(t, stream.AtLeastOnce) }

// TestBrokerCrashExactlyOnce: the same power cuts under ExactlyOnce, read
// read_committed: every zone ends with exactly the requests produced.
func TestBrokerCrashExactlyOnce(t *testing.T) { brokerCrash(t, stream.ExactlyOnce) }

func brokerCrash(t *testing.T, g stream.Guarantee) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b := weirtest.Start(t, weirtest.MemStorage())
	if err := CreateTopics(ctx, b.Admin(), 3); err != nil {
		t.Fatal(err)
	}
	builder := stream.NewBuilder()
	Build(builder, Config{})
	app, err := stream.NewApp(AppID, builder, stream.Brokers(b.Addr()), stream.StateDir(t.TempDir()),
		stream.CommitInterval(50*time.Millisecond), stream.MaxPollRecords(50), stream.Delivery(g))
	if err != nil {
		t.Fatal(err)
	}
	appCtx, stopApp := context.WithCancel(ctx)
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()

	board := NewBoard()
	cl := b.Client(kgo.ConsumeTopics(SurgeTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	poll := func() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out: board %+v", board.Snapshot())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := board.Apply(r); err != nil {
				t.Fatal(err)
			}
		})
	}
	var crashedAt []int64

	events := generate(5, 30, 3000)
	prod := b.Client()
	for i, chunk := 0, 500; i < len(events); i += chunk {
		var recs []*kgo.Record
		for _, e := range events[i:min(i+chunk, len(events))] {
			recs = append(recs, e.Record())
		}
		// acks=all: once ProduceSync returns, the records survive a crash.
		for {
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err == nil {
				break
			} else if ctx.Err() != nil {
				t.Fatal(err)
			}
			recs = recs[:0] // a failed batch may be partly stored: resend all of this chunk
			for _, e := range events[i:min(i+chunk, len(events))] {
				recs = append(recs, e.Record())
			}
		}
		if i == 1000 || i == 2000 {
			// Crash while the App is mid-stream: it has counted some
			// of the requests produced so far, not yet all.
			sent, _ := model(events[:i])
			var half int64
			for _, n := range sent {
				half += n / 2
			}
			for board.Requests() < half {
				poll()
			}
			b.CrashRestart()
			crashedAt = append(crashedAt, board.Updates())
		}
	}
	wantReq, _ := model(events)

	done := func() bool {
		got := map[string]int64{}
		for _, z := range board.Snapshot() {
			got[z.Zone] = z.Requests
		}
		for zone, n := range wantReq {
			if got[zone] < n {
				return false
			}
		}
		return true
	}
	for !done() {
		if ctx.Err() != nil {
			t.Fatalf("a request was lost: board %+v, want at least %v", board.Snapshot(), wantReq)
		}
		poll()
	}
	stopApp()
	if err := <-appDone; err != nil {
		t.Fatalf("app.Run: %v", err)
	}
	// Read whatever else the App wrote before it stopped (a late
	// duplicate must be seen too): until three polls in a row find nothing.
	for empty := 0; empty < 3; {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			empty++
		}
		fs.EachRecord(func(r *kgo.Record) {
			if err := board.Apply(r); err != nil {
				t.Fatal(err)
			}
		})
	}
	var extra int64
	for _, z := range board.Snapshot() {
		extra += z.Requests - wantReq[z.Zone]
	}
	if g == stream.ExactlyOnce && extra != 0 {
		t.Errorf("exactly-once: %d requests counted more than once; board %+v, want %v", extra, board.Snapshot(), wantReq)
	}
	t.Logf("crashed after %v output updates; requests counted more than once (%v): %d", crashedAt, g, extra)
}

// uncommittedData counts the committed records of topic/partition in
// [from, to) that are not watermark markers.
func uncommittedData(ctx context.Context, t *testing.T, b *weirtest.Broker, topic string, p int32, from, to int64) int {
	t.Helper()
	cl := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	data := 0
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			return data // only control records left
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("read %s/%d: %v", topic, p, err)
		}
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok, _ := stream.ParseWatermarkMarker(r.Headers); !ok {
				data++
			}
			last = r.Offset
		})
		// The last offset may be a transaction's control record, which
		// the client does not return.
		if last+2 >= to {
			return data
		}
	}
	t.Fatalf("read %s/%d: %v", topic, p, ctx.Err())
	return data
}
