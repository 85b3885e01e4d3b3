package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/bench/nexmark"
)

// newBenchCmd is `weir bench`: benchmark workloads run against weir or any
// Kafka-compatible cluster.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark workloads (Nexmark)",
	}
	nx := newBenchNexmarkCmd()
	nx.AddCommand(newBenchNexmarkGenerateCmd())
	cmd.AddCommand(nx)
	return cmd
}

type nexmarkGenerateOptions struct {
	topic      string
	events     int64
	rate       float64
	seed       uint64
	eventRate  int64
	disorder   time.Duration
	partitions int32
	baseTime   int64
}

func newBenchNexmarkGenerateCmd() *cobra.Command {
	o := &nexmarkGenerateOptions{}
	var cf *clientFlags
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Write N Nexmark events to a topic",
		Long: `Write --events Nexmark events (persons, auctions and bids, 1:3:46) to --topic, creating the
topic with --partitions when it is missing. Each record's value is the event as JSON
({"event_type":0|1|2,"person":...,"auction":...,"bid":...}), its key is empty and its
timestamp is the event's dateTime.

The events are a pure function of --seed, --base-time, --event-rate and --disorder: event
n has dateTime base-time + n*1000/event-rate ms; --disorder D shuffles the order so that no
event is more than D behind the largest dateTime written before it. --rate paces the
writes in records per second of wall-clock time (0: as fast as the cluster takes them).`,
		Example: `  weir bench nexmark generate --topic nexmark --events 1000000 --seed 1 --base-time 1700000000000
  weir bench nexmark generate --topic nexmark --events 100000 --rate 10000 --disorder 2s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("base-time") {
				o.baseTime = time.Now().UnixMilli()
			}
			return o.run(cmd.Context(), cf, cmd.OutOrStdout())
		},
	}
	cf = addClientFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.topic, "topic", "", "topic to write the events to (required)")
	f.Int64Var(&o.events, "events", 0, "number of events to write (required)")
	f.Float64Var(&o.rate, "rate", 0, "target records per second of wall-clock time (0: as fast as possible)")
	f.Uint64Var(&o.seed, "seed", 1, "random seed of the generator")
	f.Int64Var(&o.eventRate, "event-rate", 10_000, "events per second of event time (dateTime advance)")
	f.DurationVar(&o.disorder, "disorder", 0, "bounded disorder: no event is more than this behind the max dateTime before it (ms precision)")
	f.Int32Var(&o.partitions, "partitions", 1, "partitions of the topic if it is created")
	f.Int64Var(&o.baseTime, "base-time", 0, "dateTime of the first event, Unix ms (default: now)")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("events")
	return cmd
}

func (o *nexmarkGenerateOptions) run(ctx context.Context, cf *clientFlags, stdout io.Writer) error {
	if o.events < 0 {
		return fmt.Errorf("--events %d is negative", o.events)
	}
	if o.rate < 0 {
		return fmt.Errorf("--rate %v is negative", o.rate)
	}
	if o.partitions < 1 {
		return fmt.Errorf("--partitions %d: need at least 1", o.partitions)
	}
	gen, err := nexmark.NewGenerator(nexmark.GeneratorConfig{
		Seed: o.seed, BaseTime: o.baseTime, EventsPerSecond: o.eventRate, Disorder: o.disorder,
	})
	if err != nil {
		return err
	}
	if err := o.ensureTopic(ctx, cf); err != nil {
		return err
	}
	cl, err := cf.client(kgo.DefaultProduceTopic(o.topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		firstErr error
		counts   [3]int64
		minTime  int64
		maxTime  int64
	)
	start := time.Now()
	var buf []byte
	for i := int64(0); i < o.events; i++ {
		if o.rate > 0 {
			due := start.Add(time.Duration(float64(i) / o.rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		e := gen.Next()
		if buf, err = nexmark.Encode(buf[:0], e); err != nil {
			return err
		}
		ts := e.DateTime()
		counts[e.Type]++
		if i == 0 || ts < minTime {
			minTime = ts
		}
		maxTime = max(maxTime, ts)
		rec := &kgo.Record{Value: append([]byte(nil), buf...), Timestamp: time.UnixMilli(ts)}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
		mu.Lock()
		err := firstErr
		mu.Unlock()
		if err != nil {
			break
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", o.topic, firstErr)
	}
	elapsed := time.Since(start)
	total := counts[0] + counts[1] + counts[2]
	fmt.Fprintf(stdout, "wrote %d events to %s (%d persons, %d auctions, %d bids) in %v (%.0f events/s)\n",
		total, o.topic, counts[0], counts[1], counts[2], elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
	if total > 0 {
		fmt.Fprintf(stdout, "seed %d, base-time %d, event-rate %d, disorder %v: dateTime %d..%d\n",
			o.seed, o.baseTime, o.eventRate, o.disorder, minTime, maxTime)
	}
	return nil
}

// ensureTopic creates the topic with --partitions unless it exists.
func (o *nexmarkGenerateOptions) ensureTopic(ctx context.Context, cf *clientFlags) error {
	ctx, adm, done, err := cf.adminCtx(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := adm.CreateTopic(ctx, o.partitions, -1, nil, o.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", o.topic, err)
	}
	return nil
}
