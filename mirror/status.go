package mirror

import (
	"context"
	"fmt"
	"time"
)

// PartitionStatus is the copy state of one source partition, from the
// progress stored on the target and the source's end offset.
type PartitionStatus struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	TargetTopic string `json:"target_topic"`
	// Copied is the mirror's progress: every source record below it is on
	// the target. SourceEnd is the source's last stable offset.
	Copied    int64 `json:"copied"`
	SourceEnd int64 `json:"source_end"`
	// LagRecords is SourceEnd - Copied (offsets, so transaction markers
	// count). LagSeconds is 0 when caught up, else the age of the last
	// record copied (now minus its source timestamp).
	LagRecords int64   `json:"lag_records"`
	LagSeconds float64 `json:"lag_seconds"`
	// LastSync is when the progress was last written.
	LastSync time.Time `json:"last_sync"`
}

// Status reports the copy state of every partition the mirror named by
// cfg.ID has progress for. It reads the target's progress topic and the
// source's end offsets; the mirror need not be running. cfg's topics are
// not needed.
func Status(ctx context.Context, cfg Config) ([]PartitionStatus, error) {
	c, _, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	src, tgt, err := c.adminClients()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	defer tgt.Close()
	progress, err := readProgress(ctx, &c, tgt)
	if err != nil {
		return nil, err
	}
	topics := map[string]bool{}
	var names []string
	for p := range progress {
		if !topics[p.topic] {
			topics[p.topic] = true
			names = append(names, p.topic)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	ends, err := src.ListCommittedOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("source end offsets: %w", err)
	}
	now := time.Now()
	var out []PartitionStatus
	for _, p := range sortedTPs(progress) {
		s := progress[p]
		st := PartitionStatus{Topic: p.topic, Partition: p.partition, TargetTopic: s.Target, Copied: s.Source,
			SourceEnd: -1, LagRecords: -1, LastSync: time.UnixMilli(s.WrittenMs).UTC()}
		if o, ok := ends.Lookup(p.topic, p.partition); ok && o.Err == nil {
			st.SourceEnd = o.Offset
			st.LagRecords = max(o.Offset-s.Source, 0)
			if st.LagRecords > 0 && s.LastTimestampMs >= 0 {
				st.LagSeconds = max(now.Sub(time.UnixMilli(s.LastTimestampMs)).Seconds(), 0)
			}
		}
		out = append(out, st)
	}
	return out, nil
}
