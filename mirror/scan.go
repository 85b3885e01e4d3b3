package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

func (p tp) String() string { return fmt.Sprintf("%s/%d", p.topic, p.partition) }

// scanQuiet is how long a scan waits for a record before it concludes that
// what remains below its end is invisible (aborted records, under
// read_committed).
const scanQuiet = 5 * time.Second

// errScanStalled is returned by a read_uncommitted scan that saw nothing
// for scanQuiet before reaching its end.
var errScanStalled = errors.New("mirror: no record arrived before the end offset")

// scan reads topic/partition from offset from up to end (exclusive) with a
// client built from opts, calling fn for every record in offset order,
// control records (transaction markers) included, so that the caller knows
// the position reached. It returns when fn returns false, when a record at
// end-1 or later arrives, or (read_committed only) when nothing arrives for
// scanQuiet: the rest is aborted and invisible.
func scan(ctx context.Context, opts []kgo.Opt, topic string, partition int32, from, end int64, committed bool, fn func(*kgo.Record) bool) error {
	if from >= end {
		return nil
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	quietSince := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return fmt.Errorf("read %s/%d from %d: %w", topic, partition, from, ferr)
		}
		n := 0
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			if stop || r.Offset >= end {
				stop = true
				return
			}
			n++
			if !fn(r) || r.Offset >= end-1 {
				stop = true
			}
		})
		if stop {
			return nil
		}
		if n > 0 {
			quietSince = time.Now()
		} else if time.Since(quietSince) > scanQuiet {
			if committed {
				return nil
			}
			return fmt.Errorf("read %s/%d from %d to %d: %w", topic, partition, from, end, errScanStalled)
		}
	}
}

// endOffsets lists the end offsets of topics: the last stable offsets with
// committed (what a read_committed reader reaches), else high watermarks.
func endOffsets(ctx context.Context, adm *kadm.Client, committed bool, topics ...string) (kadm.ListedOffsets, error) {
	var l kadm.ListedOffsets
	var err error
	if committed {
		l, err = adm.ListCommittedOffsets(ctx, topics...)
	} else {
		l, err = adm.ListEndOffsets(ctx, topics...)
	}
	if err != nil {
		return nil, err
	}
	return l, l.Error()
}

// isRunKey reports whether a record of a mirror topic is a run-start
// marker (written by an exactly-once mirror to claim its transactional id)
// rather than a sync. Topic names cannot contain ':'.
func isRunKey(key []byte) bool { return strings.HasPrefix(string(key), "run:") }

// syncsBounds returns the start and (read_committed) end offsets of a
// mirror topic of the target.
func syncsBounds(ctx context.Context, adm *kadm.Client, topic string) (int64, int64, error) {
	ends, err := endOffsets(ctx, adm, true, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("end offset of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("start offset of %s: %w", topic, err)
	}
	end, _ := ends.Lookup(topic, 0)
	start, _ := starts.Lookup(topic, 0)
	return start.Offset, end.Offset, nil
}

// readSyncs reads every sync of a mirror topic (progress or offset-syncs)
// of the target, read_committed, in the order written.
func readSyncs(ctx context.Context, cfg *Config, adm *kadm.Client, topic string) ([]offsetSync, error) {
	start, end, err := syncsBounds(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	return readSyncsRange(ctx, cfg, topic, start, end)
}

// readSyncsRange reads the syncs of topic in [from, end), in order.
func readSyncsRange(ctx context.Context, cfg *Config, topic string, from, end int64) ([]offsetSync, error) {
	var out []offsetSync
	var derr error
	err := scan(ctx, cfg.targetOpts(), topic, 0, from, end, true, func(r *kgo.Record) bool {
		if r.Attrs.IsControl() || isRunKey(r.Key) {
			return true
		}
		s, err := decodeSync(r.Key, r.Value)
		if err != nil {
			derr = fmt.Errorf("%s offset %d: %w", topic, r.Offset, err)
			return false
		}
		out = append(out, s)
		return true
	})
	if derr != nil {
		return nil, derr
	}
	return out, err
}

// readProgress reads the mirror's progress topic on the target: the newest
// sync of every partition it has copied. A target without the topic (the
// mirror never ran against it) has no progress: empty, not an error.
func readProgress(ctx context.Context, c *Config, tgt *kadm.Client) (map[tp]offsetSync, error) {
	all, err := readSyncs(ctx, c, tgt, c.progressTopic())
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("read progress of mirror %s: %w", c.ID, err)
	}
	return latestSyncs(all), nil
}

// latestSyncs keeps the last sync of each partition.
func latestSyncs(all []offsetSync) map[tp]offsetSync {
	m := map[tp]offsetSync{}
	for _, s := range all {
		m[tp{s.Topic, s.Partition}] = s
	}
	return m
}
