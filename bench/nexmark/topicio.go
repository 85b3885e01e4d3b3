package nexmark

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// WriteEvents writes events to topic in order, event i to partition i mod
// partitions, each with the event's dateTime as its timestamp and an empty
// key; it returns once all are acknowledged. The client must partition
// manually (kgo.RecordPartitioner(kgo.ManualPartitioner())). Each
// partition receives a subsequence of events, so whatever disorder bound
// the sequence keeps, every partition keeps it too.
func WriteEvents(ctx context.Context, cl *kgo.Client, topic string, events []Event, partitions int32) error {
	if partitions < 1 {
		return fmt.Errorf("nexmark: write %s: %d partitions", topic, partitions)
	}
	var first error
	errs := make(chan error, 1)
	for i, e := range events {
		v, err := Encode(nil, e)
		if err != nil {
			return err
		}
		r := &kgo.Record{Topic: topic, Partition: int32(i % int(partitions)), Value: v,
			Timestamp: time.UnixMilli(e.DateTime())}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("nexmark: write %s: %w", topic, err)
	}
	select {
	case first = <-errs:
		return fmt.Errorf("nexmark: write %s: %w", topic, first)
	default:
	}
	return nil
}

// ReadTopic reads topic from its start up to its end offsets when called,
// committed records only (read_committed, so a transactional writer's
// aborted records are skipped), and returns them per partition in offset
// order, partitions in order. opts are the client's (seed brokers, ...).
func ReadTopic(ctx context.Context, topic string, opts ...kgo.Opt) ([]Output, error) {
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return nil, fmt.Errorf("nexmark: read %s: end offsets: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("nexmark: read %s: end offsets: %w", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	byPart := map[int32][]Output{}
	var parts []int32
	ends.Each(func(o kadm.ListedOffset) { parts = append(parts, o.Partition) })
	if len(want) > 0 {
		cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		for len(want) > 0 {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("nexmark: read %s: %w (partitions not read to their end: %v)", topic, err, want)
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				return nil, fmt.Errorf("nexmark: read %s: %w", topic, ferr)
			}
			fs.EachRecord(func(r *kgo.Record) {
				end, ok := want[r.Partition]
				if !ok || r.Offset >= end {
					return
				}
				if !r.Attrs.IsControl() {
					byPart[r.Partition] = append(byPart[r.Partition], Output{Partition: r.Partition, Key: r.Key, Value: r.Value})
				}
				if r.Offset+1 >= end {
					delete(want, r.Partition)
				}
			})
		}
	}
	var out []Output
	for p := range int32(len(parts)) {
		out = append(out, byPart[p]...)
	}
	return out, nil
}
