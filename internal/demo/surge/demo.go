package surge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/stream"
)

// DemoOptions configure RunDemo.
type DemoOptions struct {
	Brokers    []string      // seed brokers, required
	AppID      string        // default AppID
	Partitions int32         // of the input and output topics when RunDemo creates them; default 3
	StateDir   string        // the App's local stores, required
	Rate       float64       // generated events per second; 0 runs the App without a generator
	Seed       uint64        // generator seed
	Duration   time.Duration // 0: until ctx is done
	// Refresh is how often the table is redrawn when it changed. Default 1s.
	Refresh time.Duration
	// DrainTimeout bounds the wait, once Duration is over, for the App to
	// process everything generated. Default 30s.
	DrainTimeout time.Duration
	Out          io.Writer // the guarantee statement, then the table; required
	// Live redraws the table in place (ANSI cursor movement: for a
	// terminal); otherwise every refresh appends a new table.
	Live   bool
	Logger *slog.Logger // default: discard
	// Registerer receives the App's metrics; optional.
	Registerer prometheus.Registerer
	// AppOpts are added to the App's options (a query server, say).
	AppOpts []stream.Opt
}

// RunDemo creates the topics, runs the surge App and (if Rate > 0) the
// generator, and writes to Out first the App's Describe() statement, then a
// table of the zones each time it changes. It stops when ctx is done (at
// once: the App flushes and commits what it processed) or after Duration
// (then it first waits until the App has processed everything generated, so
// the last table is complete). It returns nil after a clean stop.
func RunDemo(ctx context.Context, o DemoOptions) error {
	if len(o.Brokers) == 0 || o.StateDir == "" || o.Out == nil {
		return errors.New("surge demo: brokers, state dir and output are required")
	}
	if o.AppID == "" {
		o.AppID = AppID
	}
	if o.Partitions <= 0 {
		o.Partitions = 3
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rate < 0 {
		return fmt.Errorf("surge demo: rate %v < 0", o.Rate)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...),
		kgo.ConsumeTopics(SurgeTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("surge demo: client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := CreateTopics(ctx, adm, o.Partitions); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("surge demo: %w", err)
	}

	b := stream.NewBuilder()
	Build(b, Config{})
	opts := []stream.Opt{stream.Brokers(o.Brokers...), stream.StateDir(o.StateDir), stream.Logger(o.Logger),
		stream.CommitInterval(200 * time.Millisecond), EventTime()}
	if o.Registerer != nil {
		opts = append(opts, stream.Registerer(o.Registerer))
	}
	opts = append(opts, o.AppOpts...)
	app, err := stream.NewApp(o.AppID, b, opts...)
	if err != nil {
		return err
	}
	fmt.Fprint(o.Out, app.Describe())
	if o.Live {
		fmt.Fprintln(o.Out)
	}

	// The App stops after the generator (and the drain), so it gets its
	// own context.
	appCtx, stopApp := context.WithCancel(context.WithoutCancel(ctx))
	defer stopApp()
	appDone := make(chan error, 1)
	go func() { appDone <- app.Run(appCtx) }()

	var counts Counts
	genDone := make(chan error, 1)
	var genCl *kgo.Client
	if o.Rate > 0 {
		genCl, err = kgo.NewClient(kgo.SeedBrokers(o.Brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			stopApp()
			return errors.Join(fmt.Errorf("surge demo: generator client: %w", err), <-appDone)
		}
		defer genCl.Close()
		g := NewGenerator(o.Seed, DriversFor(o.Rate))
		go func() { genDone <- Run(ctx, genCl, g, o.Rate, o.Duration, time.Now, &counts) }()
	} else {
		go func() {
			var deadline <-chan time.Time
			if o.Duration > 0 {
				deadline = time.After(o.Duration)
			}
			select {
			case <-ctx.Done():
			case <-deadline:
			}
			genDone <- nil
		}()
	}

	// The board reader: everything written to SurgeTopic, from the start.
	board := NewBoard()
	readCtx, stopRead := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRead()
	var (
		readMu  sync.Mutex
		readErr error
		readPos = map[int32]int64{} // next offset per partition
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for readCtx.Err() == nil {
			fs := cl.PollFetches(readCtx)
			if readCtx.Err() != nil {
				return
			}
			readMu.Lock()
			fs.EachError(func(_ string, _ int32, err error) {
				if readErr == nil {
					readErr = err
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				if err := board.Apply(r); err != nil && readErr == nil {
					readErr = err
				}
				readPos[r.Partition] = r.Offset + 1
			})
			readMu.Unlock()
		}
	}()

	start := time.Now()
	p := &printer{out: o.Out, live: o.Live}
	draw := func(final bool) {
		// Short enough for an 80-column terminal: a wrapped line would
		// break the in-place redraw.
		status := fmt.Sprintf("%s  %d requests, %d driver statuses produced · %d updates",
			time.Since(start).Truncate(time.Second), counts.Requests.Load(), counts.Statuses.Load(),
			board.Updates())
		if o.Rate == 0 {
			status = fmt.Sprintf("%s  %d updates of %s", time.Since(start).Truncate(time.Second),
				board.Updates(), SurgeTopic)
		}
		if final {
			status += " · final"
		}
		p.draw(status, board)
	}

	tick := time.NewTicker(o.Refresh)
	defer tick.Stop()
	var lastUpdates int64 = -1
	var runErr error
	interrupted := false
wait:
	for {
		select {
		case err := <-genDone:
			runErr = err
			interrupted = ctx.Err() != nil
			break wait
		case err := <-appDone:
			appDone <- err // for the shutdown below
			runErr = fmt.Errorf("surge demo: app stopped: %w", err)
			if err == nil {
				runErr = errors.New("surge demo: app stopped")
			}
			break wait
		case <-tick.C:
			if n := board.Updates(); n != lastUpdates {
				lastUpdates = n
				draw(false)
			}
		}
	}

	// Wait for the App to catch up with what was produced (not after an
	// interrupt: Ctrl-C stops now), then stop it and read the output to its
	// end so the last table is complete.
	if runErr == nil && !interrupted {
		dctx, cancel := context.WithTimeout(ctx, o.DrainTimeout)
		if err := waitNoLag(dctx, adm, o.AppID, tick.C, func() { draw(false) }); err != nil && ctx.Err() == nil {
			runErr = fmt.Errorf("surge demo: the app did not catch up within %v: %w", o.DrainTimeout, err)
		}
		cancel()
	}
	stopApp()
	if err := <-appDone; err != nil && runErr == nil {
		runErr = err
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if ends, err := adm.ListEndOffsets(ectx, SurgeTopic); err == nil {
		for ectx.Err() == nil {
			done := true
			readMu.Lock()
			ends.Each(func(e kadm.ListedOffset) {
				if e.Err == nil && readPos[e.Partition] < e.Offset {
					done = false
				}
			})
			readMu.Unlock()
			if done {
				break
			}
			select {
			case <-ectx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	stopRead()
	<-readDone
	draw(true)
	readMu.Lock()
	defer readMu.Unlock()
	if runErr == nil && readErr != nil {
		runErr = fmt.Errorf("surge demo: read %s: %w", SurgeTopic, readErr)
	}
	return runErr
}

// waitNoLag returns once the group has committed offsets at the end of every
// partition it consumes, calling redraw on each tick meanwhile.
func waitNoLag(ctx context.Context, adm *kadm.Client, group string, tick <-chan time.Time, redraw func()) error {
	for {
		lags, err := adm.Lag(ctx, group)
		if err == nil {
			if l, ok := lags[group]; ok && l.Error() == nil && len(l.Lag) > 0 && l.Lag.Total() == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			redraw()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// printer writes the status line and table, in place when live.
type printer struct {
	out   io.Writer
	live  bool
	lines int // lines of the previous live drawing
}

func (p *printer) draw(status string, b *Board) {
	if p.live && p.lines > 0 {
		fmt.Fprintf(p.out, "\x1b[%dF\x1b[J", p.lines) // to the start of the previous drawing, clear below
	} else if !p.live {
		fmt.Fprintln(p.out)
	}
	fmt.Fprintln(p.out, status)
	n, _ := b.Render(p.out)
	p.lines = n + 1
}
